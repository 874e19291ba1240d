/* tests/model/test_precision.c — modattn_model_options.precision (bf16x3, bf16, int8) against
 * sentence-transformers' fp32 goldens (tests/fixtures/golden_minilm.jsonl):
 *   - where the CPU runs the mode's GEMMs (bf16x3: AMX-BF16; bf16: AVX512_BF16; int8:
 *     AVX512_VNNI): every input's cosine to the fp32 golden is >= the mode's floor (bf16x3
 *     0.99999, the exactness bar, and >= 0.9999999 to our own fp32 model's; bf16 0.999; int8
 *     0.95, mean >= 0.99; the minimum and mean are printed), token ids are unchanged, a text alone equals its vector
 *     in a batch bit for bit (also on 3 threads, and with few_inputs), the identity differs from
 *     fp32's and the vectors too, the packed weights take 2 (1) bytes where fp32's take 4, and
 *     everything is given back;
 *   - where it does not (a CPU without it, or run with MODATTN_CPU_DISABLE=avx512_bf16,avx512_vnni
 *     as the second ctest entry does on every machine): the load is refused with
 *     MODATTN_EUNSUPPORTED naming the instruction set, `supports_op` says the same, and nothing
 *     runs in fp32 instead. Under --mode (one ctest entry per mode) that case then exits 77, so
 *     CTest lists it as skipped with the reason; where the CPU has the instructions (read from
 *     /proc/cpuinfo here, not from the library) a refusal is a failure;
 *   - always: precision names parse and unknown ones are refused with the choices, and the library
 *     offers each mode exactly where the CPU has its instructions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "embed_golden.h"
#include "modattn/backend/device.h"
#include "modattn/modattn.h"
#include "modattn/model.h"
#include "test_util.h"

#define DIR ".models/all-MiniLM-L6-v2"
typedef struct mode {
    modattn_precision prec;
    modattn_op op;
    double min_cosine, min_mean;
    int bytes; /* per packed weight */
    const char *isa;
    double min_cos_fp32; /* to the fp32 model's vector, every input (0: not checked) */
} mode;
static const mode k_modes[] = {
    {MODATTN_PRECISION_BF16X3, MODATTN_OP_LINEAR_BF16X3, 0.99999, 0.999999, 6, "AMX-BF16", 0.9999999},
    {MODATTN_PRECISION_BF16, MODATTN_OP_LINEAR_BF16, 0.999, 0.9999, 2, "AVX512_BF16", 0},
    {MODATTN_PRECISION_INT8, MODATTN_OP_LINEAR_INT8, 0.95, 0.99, 1, "AVX512_VNNI", 0},
};

static void check_parse(void) {
    modattn_precision p = MODATTN_PRECISION_BF16;
    CHECK(modattn_precision_parse("fp32", &p) == 0 && p == MODATTN_PRECISION_FP32);
    CHECK(modattn_precision_parse("BF16", &p) == 0 && p == MODATTN_PRECISION_BF16);
    CHECK(modattn_precision_parse("bfloat16", &p) == 0 && p == MODATTN_PRECISION_BF16);
    CHECK(modattn_precision_parse("Int8", &p) == 0 && p == MODATTN_PRECISION_INT8);
    CHECK(modattn_precision_parse("BF16x3", &p) == 0 && p == MODATTN_PRECISION_BF16X3);
    CHECK(strcmp(modattn_precision_name(MODATTN_PRECISION_BF16X3), "bf16x3") == 0);
    CHECK(modattn_precision_parse("", &p) == 0 && p == MODATTN_PRECISION_FP32);
    CHECK(modattn_precision_parse("fp16", &p) == MODATTN_EINVAL);
    CHECK_MSG(strstr(modattn_last_error(), "fp16") && strstr(modattn_last_error(), "bf16") &&
                  strstr(modattn_last_error(), "int8"), "message: %s",
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

/* Where the mode is not available: refused, with the reason, and no model. */
static void check_refused(modattn_ctx *ctx, const mode *md, const char *why) {
    const char *name = modattn_precision_name(md->prec);
    printf("%s: not available here: %s\n", name, why);
    CHECK_MSG(strstr(why, md->isa) || strstr(why, "oneDNN") || strstr(why, "x86"), "reason: %s", why);
    modattn_model *m = NULL;
    int st = load(ctx, md->prec, false, &m);
    CHECK_MSG(st == MODATTN_EUNSUPPORTED && m == NULL, "load in %s gave %d", name, st);
    CHECK_MSG(strstr(modattn_last_error(), name) && strstr(modattn_last_error(), why), "message: %s",
              modattn_last_error());
    printf("%s load refused: %s\n", name, modattn_last_error());
    /* the host fallback does not move a precision elsewhere either */
    modattn_model_options o;
    memset(&o, 0, sizeof o);
    o.precision = md->prec;
    o.host_fallback = true;
    CHECK(modattn_model_load_ex(ctx, DIR, &o, &m) == MODATTN_EUNSUPPORTED && m == NULL);
    modattn_model_free(m);
}

static void check_mode(modattn_ctx *ctx, const mode *md) {
    const char *name = modattn_precision_name(md->prec);
    size_t n_all = 0;
    embed_golden *g = eg_load("tests/fixtures/golden_minilm.jsonl", &n_all);
    CHECK_MSG(g && n_all > 0, "cannot read the fixture");
    if (!g) return;
    const size_t n = eg_sanitizer_subset(g, n_all, name);
    modattn_mem_stats m0, m1;
    modattn_mem_get_stats(&m0);
    modattn_model *f32 = NULL, *m = NULL;
    CHECK_MSG(load(ctx, MODATTN_PRECISION_FP32, false, &f32) == 0, "fp32 load: %s", modattn_last_error());
    modattn_mem_stats mf;
    modattn_mem_get_stats(&mf);
    int st = load(ctx, md->prec, false, &m);
    CHECK_MSG(st == 0, "%s load: %s", name, modattn_last_error());
    modattn_mem_stats mb;
    modattn_mem_get_stats(&mb);
    if (st || !f32) {
        modattn_model_free(m), modattn_model_free(f32);
        eg_free(g, n_all);
        return;
    }
    const modattn_model_info *fi = modattn_model_get_info(f32), *bi = modattn_model_get_info(m);
    CHECK(bi->precision == md->prec && fi->precision == MODATTN_PRECISION_FP32);
    CHECK_MSG(strcmp(fi->identity, bi->identity) != 0, "%s and fp32 share the identity %s", name, bi->identity);
    /* packed weights: the layers' copy takes md->bytes a weight where fp32's takes 4 (the rest,
     * the mapped file with the embeddings, is the same for both; int8's scales are ~1% more;
     * bf16x3's [hi | lo | hi] takes 6, more than fp32) */
    const long long wf = (long long)(mf.current[MODATTN_MEM_WEIGHTS] - m0.current[MODATTN_MEM_WEIGHTS]);
    const long long wb = (long long)(mb.current[MODATTN_MEM_WEIGHTS] - mf.current[MODATTN_MEM_WEIGHTS]);
    const long long H = fi->hidden, I = fi->intermediate, layer_f32 = (long long)fi->layers * (4 * H * H + 2 * H * I) * 4;
    const long long saved = layer_f32 * (4 - md->bytes) / 4;
    const long long lo = saved > 0 ? saved * 95 / 100 : saved * 105 / 100, hi = saved > 0 ? saved * 105 / 100 : saved * 95 / 100;
    CHECK_MSG(wb > 0 && wf - wb >= lo && wf - wb <= hi,
              "weights: fp32 model %lld bytes, %s model %lld; the layers' fp32 weights are %lld", wf, name, wb, layer_f32);
    printf("weights counted: fp32 model %.1f MB, %s model %.1f MB (the layers' GEMM weights: %.1f MB in fp32)\n",
           wf / 1e6, name, wb / 1e6, layer_f32 / 1e6);

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
        CHECK_MSG(c >= md->min_cosine, "%s: input %zu: cosine %.6f < %g", name, i, c, md->min_cosine);
        CHECK_MSG(ntok[i] == (int32_t)g[i].nids, "input %zu: %d tokens, want %zu", i, (int)ntok[i], g[i].nids);
    }
    printf("%s vs sentence-transformers fp32: %zu inputs, min cosine %.9f (input %zu), mean %.9f\n", name, n, mn,
           worst, sum / (double)n);
    CHECK_MSG(sum / (double)n >= md->min_mean, "%s: mean cosine %.6f < %g", name, sum / (double)n, md->min_mean);
    /* not fp32 in disguise: the vectors differ from the fp32 model's */
    CHECK(modattn_model_embed(f32, texts, lens, 1, one, NULL) == 0);
    CHECK_MSG(memcmp(one, ref, dim * sizeof *one) != 0, "%s gave fp32's bits for input 0", name);
    if (md->min_cos_fp32 > 0) { /* and yet as close to them as the mode promises */
        CHECK(modattn_model_embed(f32, texts, lens, n, out, NULL) == 0);
        double mf32 = 2.0;
        for (size_t i = 0; i < n; i++) {
            const double c = eg_cosine(ref + i * dim, out + i * dim, dim);
            if (c < mf32) mf32 = c;
        }
        printf("%s vs modattn fp32: min cosine %.10f (1 - %.2e)\n", name, mf32, 1.0 - mf32);
        CHECK_MSG(mf32 >= md->min_cos_fp32, "%s: min cosine to fp32 %.10f < %.7f", name, mf32, md->min_cos_fp32);
    }

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
    CHECK(modattn_ctx_create(&o3, &c3) == 0 && load(c3, md->prec, true, &few) == 0 && load(c3, md->prec, false, &m3) == 0);
    size_t differ3 = 0, differ_few = 0;
    for (size_t i = 0; i < n && m3 && few; i++) {
        CHECK(modattn_model_embed(m3, texts + i, lens + i, 1, one, NULL) == 0);
        differ3 += memcmp(one, ref + i * dim, dim * sizeof *one) != 0;
        CHECK(modattn_model_embed(few, texts + i, lens + i, 1, one, NULL) == 0);
        differ_few += memcmp(one, ref + i * dim, dim * sizeof *one) != 0;
    }
    CHECK_MSG(m3 && differ3 == 0, "%zu texts differ alone on 3 threads vs batched", differ3);
    CHECK_MSG(few && differ_few == 0, "%zu texts differ loaded with few_inputs", differ_few);
    printf("%s: alone == batched bit for bit (2 budgets, 1 and 3 threads, few_inputs): %s\n", name,
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

/* Whether this CPU must run md's GEMMs, decided here from /proc/cpuinfo's flags (not from the
 * library, whose detection is under test), with MODATTN_CPU_DISABLE and ONEDNN_MAX_CPU_ISA applied
 * as core/cpu.c and backends/cpu/cpu_gemm.c apply them. false with what is missing in `why`. */
static bool has_flag(const char *flags, const char *f) {
    size_t n = strlen(f);
    for (const char *p = flags; (p = strstr(p, f)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return true;
    return false;
}
static bool masked(const char *name) {
    const char *list = getenv("MODATTN_CPU_DISABLE");
    if (!list) return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}
static bool cpu_runs(const mode *md, char *why, size_t len) {
    static char flags[8192];
    if (!flags[0]) {
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[8192];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5)) {
                snprintf(flags, sizeof flags, " %s", strchr(line, ':') ? strchr(line, ':') + 1 : "");
                break;
            }
        if (f) fclose(f);
        if (!flags[0]) snprintf(flags, sizeof flags, " (none)");
    }
    const bool off_all = masked("avx") || masked("avx512") || masked("avx512f");
    const char *need[3] = {"avx512bw", "avx512vl", NULL};
    const char *own = md->prec == MODATTN_PRECISION_INT8 ? "avx512_vnni" : "avx512_bf16";
    why[0] = '\0';
    for (int i = 0; i < 4; i++) {
        const char *fl = i < 2 ? need[i] : i == 2 ? own : md->prec == MODATTN_PRECISION_BF16X3 ? "amx_bf16" : NULL;
        if (!fl) continue;
        bool off = off_all || masked(fl) || (!strcmp(fl, "amx_bf16") && (masked("amx") || masked("avx512_bf16")));
        if (!has_flag(flags, fl) || off) {
            snprintf(why + strlen(why), len - strlen(why), "%sthis CPU lacks %s%s", why[0] ? "; " : "", fl,
                     off && has_flag(flags, fl) ? " (masked by MODATTN_CPU_DISABLE)" : "");
        }
    }
    if (why[0]) return false;
    const char *lim = getenv("ONEDNN_MAX_CPU_ISA");
    if (md->prec == MODATTN_PRECISION_BF16X3 && lim && *lim && !strstr(lim, "AMX") && !strstr(lim, "amx") &&
        strcasecmp(lim, "ALL") != 0 && strcasecmp(lim, "DEFAULT") != 0) {
        snprintf(why, len, "ONEDNN_MAX_CPU_ISA=%s keeps oneDNN off AMX", lim);
        return false;
    }
    return true;
}

/*   test_precision                  parsing; the library offers each mode exactly where the CPU has it
 *   test_precision --mode NAME      one mode: run against the goldens where the CPU has it (a refusal
 *                                   there fails); else the refusal is checked and it exits 77
 *                                   (CTest: skipped) saying why
 *   test_precision --expect-refused every mode refused (run with MODATTN_CPU_DISABLE masking them)
 *   test_precision --no-amx         (ONEDNN_MAX_CPU_ISA below AMX) on an AMX CPU: bf16 and int8 run on
 *                                   oneDNN's AVX-512 kernels, bf16x3 is refused; exits 77 without AMX */
int main(int argc, char **argv) {
    const bool expect_refused = argc > 1 && strcmp(argv[1], "--expect-refused") == 0;
    const bool no_amx = argc > 1 && strcmp(argv[1], "--no-amx") == 0;
    const char *only = argc > 2 && strcmp(argv[1], "--mode") == 0 ? argv[2] : NULL;
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
    if (no_amx) {
        char why[256];
        const mode bf16x3_plain = {MODATTN_PRECISION_BF16X3, MODATTN_OP_LINEAR_BF16X3, 0, 0, 0, "", 0};
        const char *lim = getenv("ONEDNN_MAX_CPU_ISA");
        unsetenv("ONEDNN_MAX_CPU_ISA"); /* the CPU's own AMX, whatever the limit */
        const bool amx = cpu_runs(&bf16x3_plain, why, sizeof why);
        if (lim) setenv("ONEDNN_MAX_CPU_ISA", lim, 1);
        if (!amx) {
            printf("test_precision --no-amx: not available here: %s (without AMX the --mode entries already run "
                   "oneDNN's AVX-512 kernels)\n", why);
            modattn_ctx_free(ctx);
            return t_fail ? test_finish("test_precision") : 77;
        }
    }
    int ran = 0, refused = 0;
    char skip_why[256] = "";
    for (size_t i = 0; i < sizeof k_modes / sizeof *k_modes; i++) {
        const char *name = modattn_precision_name(k_modes[i].prec);
        if (only && strcmp(only, name) != 0) continue;
        char why[256] = "", cpu_why[256] = "";
        const bool have = cpu && modattn_device_supports_op(cpu, k_modes[i].op, why, sizeof why);
        const bool cpu_has = cpu_runs(&k_modes[i], cpu_why, sizeof cpu_why);
        CHECK_MSG(!(expect_refused && have), "MODATTN_CPU_DISABLE did not turn %s off", name);
        CHECK_MSG(have == cpu_has, "%s: the library %s it, but %s", name, have ? "offers" : "refuses",
                  cpu_has ? "the CPU has the instructions" : cpu_why);
        if (!only && !no_amx && !expect_refused) continue; /* the modes run in their own entries */
        if (have && cpu_has) {
            check_mode(ctx, &k_modes[i]);
            ran++;
        } else {
            check_refused(ctx, &k_modes[i], why);
            refused++;
            snprintf(skip_why, sizeof skip_why, "%s", cpu_has ? why : cpu_why);
        }
    }
    if (only) CHECK_MSG(ran + refused == 1, "--mode %s: no such mode (bf16x3, bf16 or int8)", only);
    modattn_ctx_free(ctx);
    if (only && refused && !t_fail) {
        /* the mode is not on this CPU: its refusal was checked, the mode itself was not run */
        printf("test_precision --mode %s: not available here: %s\n", only, skip_why);
        return 77;
    }
    return test_finish("test_precision");
}
