/* tests/model/test_precision.c — modattn_model_options.precision (bf16) against
 * sentence-transformers' fp32 goldens (tests/fixtures/golden_minilm.jsonl):
 *   - where the CPU runs bf16 GEMMs (AVX512_BF16): every input's cosine to the fp32 golden is
 *     >= 0.999 (the minimum and mean are printed), token ids are unchanged, a text alone equals
 *     its vector in a batch bit for bit (also on 3 threads, and with few_inputs), the identity
 *     differs from fp32's, the packed weights take half fp32's bytes, everything is given back;
 *   - where it does not (a CPU without AVX512_BF16, or run with MODATTN_CPU_DISABLE=avx512_bf16,
 *     as the second ctest entry does on every machine): the load is refused with
 *     MODATTN_EUNSUPPORTED naming AVX512_BF16, `supports_op(linear_bf16)` says the same, and
 *     nothing runs in fp32 instead. That case is printed as "not available here", with why.
 *   - always: precision names parse and unknown ones are refused with the choices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed_golden.h"
#include "modattn/device.h"
#include "modattn/modattn.h"
#include "modattn/model.h"
#include "test_util.h"

#define DIR ".models/all-MiniLM-L6-v2"
#define MIN_COSINE 0.999

static void check_parse(void) {
    modattn_precision p = MODATTN_PRECISION_BF16;
    CHECK(modattn_precision_parse("fp32", &p) == 0 && p == MODATTN_PRECISION_FP32);
    CHECK(modattn_precision_parse("BF16", &p) == 0 && p == MODATTN_PRECISION_BF16);
    CHECK(modattn_precision_parse("bfloat16", &p) == 0 && p == MODATTN_PRECISION_BF16);
    CHECK(modattn_precision_parse("", &p) == 0 && p == MODATTN_PRECISION_FP32);
    CHECK(modattn_precision_parse("fp16", &p) == MODATTN_EINVAL);
    CHECK_MSG(strstr(modattn_last_error(), "fp16") && strstr(modattn_last_error(), "bf16"), "message: %s",
              modattn_last_error());
    CHECK(strcmp(modattn_precision_name(MODATTN_PRECISION_BF16), "bf16") == 0);
    CHECK(strcmp(modattn_precision_name((modattn_precision)9), "?") == 0);
}

static int load(modattn_ctx *ctx, modattn_precision p, bool few, modattn_model **m) {
    modattn_model_options o;
    memset(&o, 0, sizeof o);
    o.precision = p;
    o.few_inputs = few;
    return modattn_model_load_ex(ctx, DIR, &o, m);
}

/* Where bf16 is not available: refused, with the reason, and no model. */
static void check_refused(modattn_ctx *ctx, const char *why) {
    printf("bf16: not available here: %s\n", why);
    CHECK_MSG(strstr(why, "AVX512_BF16") || strstr(why, "oneDNN") || strstr(why, "x86"), "reason: %s", why);
    modattn_model *m = NULL;
    int st = load(ctx, MODATTN_PRECISION_BF16, false, &m);
    CHECK_MSG(st == MODATTN_EUNSUPPORTED && m == NULL, "load in bf16 gave %d", st);
    CHECK_MSG(strstr(modattn_last_error(), "bf16") && strstr(modattn_last_error(), why), "message: %s",
              modattn_last_error());
    printf("bf16 load refused: %s\n", modattn_last_error());
    /* the host fallback does not move a precision elsewhere either */
    modattn_model_options o;
    memset(&o, 0, sizeof o);
    o.precision = MODATTN_PRECISION_BF16;
    o.host_fallback = true;
    CHECK(modattn_model_load_ex(ctx, DIR, &o, &m) == MODATTN_EUNSUPPORTED && m == NULL);
    modattn_model_free(m);
}

static void check_bf16(modattn_ctx *ctx) {
    size_t n_all = 0;
    embed_golden *g = eg_load("tests/fixtures/golden_minilm.jsonl", &n_all);
    CHECK_MSG(g && n_all > 0, "cannot read the fixture");
    if (!g) return;
    const size_t n = eg_sanitizer_subset(g, n_all, "minilm/bf16");
    modattn_mem_stats m0, m1;
    modattn_mem_get_stats(&m0);
    modattn_model *f32 = NULL, *m = NULL;
    CHECK_MSG(load(ctx, MODATTN_PRECISION_FP32, false, &f32) == 0, "fp32 load: %s", modattn_last_error());
    modattn_mem_stats mf;
    modattn_mem_get_stats(&mf);
    int st = load(ctx, MODATTN_PRECISION_BF16, false, &m);
    CHECK_MSG(st == 0, "bf16 load: %s", modattn_last_error());
    modattn_mem_stats mb;
    modattn_mem_get_stats(&mb);
    if (st || !f32) {
        modattn_model_free(m), modattn_model_free(f32);
        eg_free(g, n_all);
        return;
    }
    const modattn_model_info *fi = modattn_model_get_info(f32), *bi = modattn_model_get_info(m);
    CHECK(bi->precision == MODATTN_PRECISION_BF16 && fi->precision == MODATTN_PRECISION_FP32);
    CHECK_MSG(strcmp(fi->identity, bi->identity) != 0, "bf16 and fp32 share the identity %s", bi->identity);
    /* packed weights: the layers' bf16 copy takes 2 bytes a weight where fp32's takes 4 (the
     * rest, the mapped file with the embeddings, is the same for both) */
    const long long wf = (long long)(mf.current[MODATTN_MEM_WEIGHTS] - m0.current[MODATTN_MEM_WEIGHTS]);
    const long long wb = (long long)(mb.current[MODATTN_MEM_WEIGHTS] - mf.current[MODATTN_MEM_WEIGHTS]);
    const long long H = fi->hidden, I = fi->intermediate, layer_f32 = (long long)fi->layers * (4 * H * H + 2 * H * I) * 4;
    CHECK_MSG(wb > 0 && wf - wb >= layer_f32 * 45 / 100 && wf - wb <= layer_f32 * 55 / 100,
              "weights: fp32 model %lld bytes, bf16 model %lld; the layers' fp32 weights are %lld", wf, wb, layer_f32);
    printf("weights counted: fp32 model %.1f MB, bf16 model %.1f MB (the layers' GEMM weights: %.1f MB in fp32)\n",
           wf / 1e6, wb / 1e6, layer_f32 / 1e6);

    const size_t dim = modattn_model_dim(m);
    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    float *out = malloc(n * dim * sizeof *out), *ref = malloc(n * dim * sizeof *ref), *one = malloc(dim * sizeof *one);
    int32_t *ntok = malloc(n * sizeof *ntok);
    for (size_t i = 0; i < n; i++) texts[i] = g[i].text, lens[i] = g[i].len;
    CHECK(modattn_model_embed(m, texts, lens, n, ref, ntok) == 0);
    double mn = 2.0, sum = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double c = eg_cosine(ref + i * dim, g[i].emb, dim);
        sum += c;
        if (c < mn) mn = c, worst = i;
        CHECK_MSG(c >= MIN_COSINE, "input %zu: cosine %.6f < %g", i, c, MIN_COSINE);
        CHECK_MSG(ntok[i] == (int32_t)g[i].nids, "input %zu: %d tokens, want %zu", i, (int)ntok[i], g[i].nids);
    }
    printf("bf16 vs sentence-transformers fp32: %zu inputs, min cosine %.6f (input %zu), mean %.6f\n", n, mn, worst,
           sum / (double)n);
    /* not fp32 in disguise: the vectors differ from the fp32 model's */
    CHECK(modattn_model_embed(f32, texts, lens, 1, one, NULL) == 0);
    CHECK_MSG(memcmp(one, ref, dim * sizeof *one) != 0, "bf16 gave fp32's bits for input 0");

    /* alone == batched, bit for bit: here, on 3 threads, and loaded with few_inputs */
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(modattn_model_embed(m, texts + i, lens + i, 1, one, NULL) == 0);
        differ += memcmp(one, ref + i * dim, dim * sizeof *one) != 0;
    }
    CHECK_MSG(differ == 0, "%zu of %zu texts differ alone vs batched", differ, n);
    CHECK(modattn_model_set_batch_tokens(m, 300) == 0);
    CHECK(modattn_model_embed(m, texts, lens, n, out, NULL) == 0);
    CHECK_MSG(memcmp(out, ref, n * dim * sizeof *out) == 0, "budget 300 differs from the default budget");
    modattn_ctx *c3 = NULL;
    modattn_ctx_options o3;
    memset(&o3, 0, sizeof o3);
    o3.threads = 3;
    modattn_model *m3 = NULL, *few = NULL;
    CHECK(modattn_ctx_create(&o3, &c3) == 0 && load(c3, MODATTN_PRECISION_BF16, true, &few) == 0 &&
          load(c3, MODATTN_PRECISION_BF16, false, &m3) == 0);
    size_t differ3 = 0, differ_few = 0;
    for (size_t i = 0; i < n && m3 && few; i++) {
        CHECK(modattn_model_embed(m3, texts + i, lens + i, 1, one, NULL) == 0);
        differ3 += memcmp(one, ref + i * dim, dim * sizeof *one) != 0;
        CHECK(modattn_model_embed(few, texts + i, lens + i, 1, one, NULL) == 0);
        differ_few += memcmp(one, ref + i * dim, dim * sizeof *one) != 0;
    }
    CHECK_MSG(m3 && differ3 == 0, "%zu texts differ alone on 3 threads vs batched", differ3);
    CHECK_MSG(few && differ_few == 0, "%zu texts differ loaded with few_inputs", differ_few);
    printf("bf16: alone == batched bit for bit (2 budgets, 1 and 3 threads, few_inputs): %s\n",
           differ + differ3 + differ_few == 0 ? "yes" : "no");
    modattn_model_free(m3), modattn_model_free(few);
    modattn_ctx_free(c3);

    free(texts), free(lens), free(out), free(ref), free(one), free(ntok);
    modattn_model_free(m), modattn_model_free(f32);
    modattn_mem_get_stats(&m1);
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
        if (c != MODATTN_MEM_WORKSPACE)
            CHECK_MSG(m1.current[c] == m0.current[c], "%s: %lld bytes not given back",
                      modattn_mem_category_name((modattn_mem_category)c), (long long)(m1.current[c] - m0.current[c]));
    eg_free(g, n_all);
}

int main(int argc, char **argv) {
    /* --expect-refused: the run with MODATTN_CPU_DISABLE=avx512_bf16 must take the refusal path */
    const bool expect_refused = argc > 1 && strcmp(argv[1], "--expect-refused") == 0;
    check_parse();
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    CHECK_MSG(modattn_ctx_create(&o, &ctx) == 0, "ctx: %s", modattn_last_error());
    if (!ctx) return test_finish("test_precision");
    /* an out-of-range precision is refused, not taken for fp32 */
    modattn_model *bad = NULL;
    CHECK(load(ctx, (modattn_precision)7, false, &bad) == MODATTN_EINVAL && bad == NULL);
    const modattn_device_iface *cpu = NULL;
    CHECK(modattn_device_lookup("cpu", &cpu) == 0);
    char why[256] = "";
    const bool have = cpu && modattn_device_supports_op(cpu, MODATTN_OP_LINEAR_BF16, why, sizeof why);
    CHECK_MSG(!(expect_refused && have), "MODATTN_CPU_DISABLE=avx512_bf16 did not turn bf16 off");
    if (have) check_bf16(ctx);
    else check_refused(ctx, why);
    modattn_ctx_free(ctx);
    return test_finish("test_precision");
}
