/* cli/cmd_attn.c — `modattn backends`, `modattn check`, `modattn explain`. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int cli_print_json(json_t *j) {
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    /* a refused allocation while building or writing the JSON (--mem-budget): not printed */
    if (modattn_json_take_failure() != 0 || !s) {
        modattn_json_free(s);
        return cli_json_fail("writing JSON");
    }
    puts(s);
    modattn_json_free(s);
    return 0;
}

/* --------------------------------------------------------------- backends */

int cli_cmd_backends(cli_globals *g, int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn backends [--json]\n\n"
                   "Lists every attention implementation: built in, registered, or loaded as a plugin from\n"
                   "MODATTN_PLUGIN_PATH (colon-separated files or folders of *.so), with the device it runs on,\n"
                   "its priority under --attn auto, and, when it cannot run here, why. Refused plugins are\n"
                   "listed with the reason.\n");
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) json = true;
        else {
            fprintf(stderr, "modattn backends: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    modattn_ctx *ctx;
    if (cli_open_ctx(g, &ctx)) return 1;
    size_t n = modattn_ctx_impl_count(ctx);
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            modattn_impl_info info;
            modattn_ctx_impl_info(ctx, i, &info);
            json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:b, s:s}", "name", info.name, "description", info.description,
                                  "device", modattn_device_kind_name(info.device), "priority", info.priority,
                                  "available", info.available, "origin", info.origin);
            if (!info.available) json_object_set_new(o, "reason", json_string(info.reason));
            json_array_append_new(arr, o);
        }
        json_t *errs = json_array();
        for (size_t i = 0; i < modattn_ctx_plugin_error_count(ctx); i++)
            json_array_append_new(errs, json_string(modattn_ctx_plugin_error(ctx, i)));
        char cpu[256];
        modattn_cpu_describe(cpu, sizeof cpu);
        return cli_print_json(json_pack("{s:o, s:o, s:s, s:i}", "implementations", arr, "refused_plugins", errs,
                                    "cpu_features", cpu, "threads", modattn_ctx_threads(ctx)));
    }
    char cpu[256];
    modattn_cpu_describe(cpu, sizeof cpu);
    printf("CPU features: %s; threads: %d\n\n", cpu, modattn_ctx_threads(ctx));
    printf("%-18s %-7s %-8s %-10s %s\n", "implementation", "device", "priority", "status", "description");
    for (size_t i = 0; i < n; i++) {
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, i, &info);
        printf("%-18s %-7s %-8d %-10s %s%s%s\n", info.name, modattn_device_kind_name(info.device), info.priority,
               info.available ? "available" : "UNAVAILABLE", info.description,
               strcmp(info.origin, "builtin") ? " — from " : "", strcmp(info.origin, "builtin") ? info.origin : "");
        if (!info.available) printf("%-18s   why: %s\n", "", info.reason);
    }
    size_t ne = modattn_ctx_plugin_error_count(ctx);
    if (ne) {
        printf("\nrefused plugins:\n");
        for (size_t i = 0; i < ne; i++) printf("  %s\n", modattn_ctx_plugin_error(ctx, i));
    }
    return 0;
}

/* --------------------------------------------------------------- check */

int cli_cmd_check(cli_globals *g, int argc, char **argv) {
    bool json = false, verbose = false;
    uint64_t seed = 0;
    const char *only = NULL;
    int max_configs = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn check [--backend NAME] [--configs N] [--seed N] [--verbose] [--json]\n\n"
                   "Runs the conformance suite (%d generated configurations) on every attention\n"
                   "implementation, or only NAME, against the fp64 oracle. An implementation passes a\n"
                   "configuration when its error is at most twice a naive fp32 implementation's plus 1e-6,\n"
                   "with no NaN, guard regions untouched and inputs unchanged; 'unsupported' is counted apart.\n"
                   "--seed changes the random inputs (the configurations stay the same).\n"
                   "Implementations on a device (OpenCL) run there, through device buffers with the same\n"
                   "guard regions: on the --device of their kind (e.g. --device opencl:1), else its first.\n"
                   "Exit status 1 if any configuration failed.\n",
                   modattn_conformance_grid_size());
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) verbose = true;
        else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) only = argv[++i];
        else if (strncmp(argv[i], "--backend=", 10) == 0) only = argv[i] + 10;
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            if (cli_parse_u64("check: --seed", argv[++i], &seed) != 0) return 2;
        } else if (strcmp(argv[i], "--configs") == 0 && i + 1 < argc) {
            long long v;
            if (cli_parse_ll("check: --configs", argv[++i], 1, 1000000, &v) != 0) return 2;
            max_configs = (int)v;
        } else {
            fprintf(stderr, "modattn check: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    modattn_ctx *ctx;
    if (cli_open_ctx(g, &ctx)) return 1;
    modattn_conformance_options o;
    memset(&o, 0, sizeof o);
    o.only = only;
    o.max_configs = max_configs;
    o.log = stderr;
    o.verbose = verbose;
    o.seed = seed;
    if (g->device) { /* main() has checked the name */
        const modattn_device_iface *dev;
        if (modattn_device_lookup(g->device, &dev) == 0) o.device_index = dev->id.index;
    }
    modattn_conformance_result res[64];
    size_t n = 0;
    int st = modattn_conformance_run(ctx, &o, res, 64, &n);
    if (st == MODATTN_ENOTFOUND && only) { /* --backend names nothing: a usage error */
        cli_fail("check", st);
        return 2;
    }
    if (st) return cli_fail("check", st);
    int failed = 0;
    for (size_t i = 0; i < n; i++) failed += res[i].failed;
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *r = json_pack("{s:s, s:i, s:i, s:i, s:f}", "name", res[i].name, "passed", res[i].passed, "failed",
                                  res[i].failed, "unsupported", res[i].unsupported, "worst_error_ratio",
                                  res[i].worst_ratio);
            if (res[i].first_failure[0]) json_object_set_new(r, "first_failure", json_string(res[i].first_failure));
            if (res[i].unsupported) json_object_set_new(r, "unsupported_reason", json_string(res[i].unsupported_reason));
            json_array_append_new(arr, r);
        }
        int rc = cli_print_json(json_pack("{s:o, s:i}", "implementations", arr, "configurations",
                                      max_configs ? max_configs : modattn_conformance_grid_size()));
        return rc ? rc : (failed ? 1 : 0);
    }
    printf("conformance: %d configurations against the fp64 oracle\n",
           max_configs && max_configs < modattn_conformance_grid_size() ? max_configs : modattn_conformance_grid_size());
    printf("%-18s %7s %7s %12s %12s\n", "implementation", "passed", "failed", "unsupported", "worst err/tol");
    for (size_t i = 0; i < n; i++) {
        printf("%-18s %7d %7d %12d %12.3f\n", res[i].name, res[i].passed, res[i].failed, res[i].unsupported,
               res[i].worst_ratio);
        if (res[i].first_failure[0]) printf("    first failure: %s\n", res[i].first_failure);
        if (res[i].unsupported && !res[i].passed && !res[i].failed)
            printf("    unsupported here: %s\n", res[i].unsupported_reason);
    }
    printf("%s\n", failed ? "FAILED" : "OK");
    return failed ? 1 : 0;
}

/* --------------------------------------------------------------- explain */

static int parse_shape(const char *s, int64_t v[6]) { return cli_parse_ints(s, v, 6, 0, (int64_t)1 << 40); }

/* Under --attn tune, explain measures: one call on random tensors of the shape makes the
 * dispatcher time the capable implementations (or reuse the cached times). */
static int tune_now(modattn_ctx *ctx, const modattn_attn_desc *d) {
    double nq = (double)d->B * d->Hq * d->Sq * d->D, nk = (double)d->B * d->Hkv * d->Sk * d->D;
    if ((2 * nq + 2 * nk) * 4 > 8e9) {
        fprintf(stderr, "modattn explain: the tensors of this shape need over 8 GB; not tuning\n");
        return 1;
    }
    float *q = modattn_malloc((size_t)nq * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    float *k = modattn_malloc((size_t)nk * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    float *v = modattn_malloc((size_t)nk * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    float *o = modattn_malloc((size_t)nq * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    int st = (q && k && v && o) ? 0 : modattn_mem_last_status();
    if (st == 0) {
        uint32_t r = 12345;
        for (size_t i = 0; i < (size_t)nq; i++) r = r * 1664525u + 1013904223u, q[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
        for (size_t i = 0; i < (size_t)nk; i++) {
            r = r * 1664525u + 1013904223u, k[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
            r = r * 1664525u + 1013904223u, v[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
        }
        modattn_attn_call c;
        memset(&c, 0, sizeof c);
        c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, d->B, d->Hq, d->Sq, d->D);
        c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, d->B, d->Hkv, d->Sk, d->D);
        c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, d->B, d->Hkv, d->Sk, d->D);
        c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, d->B, d->Hq, d->Sq, d->D);
        c.causal = d->causal;
        st = modattn_attention(ctx, &c);
    }
    modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(o);
    return st ? cli_fail("explain: tuning", st) : 0;
}

/* Where each of the encoder's ops runs for a model loaded on the --device (--host-fallback). */
static int explain_model(cli_globals *g, modattn_ctx *ctx, const char *dir, int64_t *v, bool have_shape) {
    modattn_model *m;
    int st = cli_load_model(g, ctx, dir, &m);
    if (st) return cli_fail("explain: loading the model", st);
    const modattn_model_info *in = modattn_model_get_info(m);
    char dn[32];
    modattn_device_format(in->device, dn, sizeof dn);
    const modattn_device_iface *dev = modattn_device_find(in->device);
    printf("model: %s on %s, precision %s\n", in->name, dn, modattn_precision_name(in->precision));
    if (in->device_choice[0]) printf("device: %s\n", in->device_choice);
    if (dev && modattn_device_has_graph(dev)) { /* no ops one by one: one compiled program */
        printf("  the whole encoder (embeddings, %d layers, pooling%s) as one compiled program on %s\n\n", in->layers,
               in->normalize ? ", normalisation" : "", dn);
        if (!have_shape)
            v[0] = 1, v[1] = v[2] = in->heads, v[3] = v[4] = (int64_t)in->max_tokens, v[5] = in->hidden / in->heads;
        modattn_model_free(m);
        return 0;
    }
    for (int op = 0; op < MODATTN_OP_COUNT; op++) {
        char reason[256] = "";
        const char *why = modattn_model_fallback_reason(m, op);
        const modattn_precision opp = op == MODATTN_OP_LINEAR_BF16     ? MODATTN_PRECISION_BF16
                                      : op == MODATTN_OP_LINEAR_INT8   ? MODATTN_PRECISION_INT8
                                      : op == MODATTN_OP_LINEAR_BF16X3 ? MODATTN_PRECISION_BF16X3
                                                                       : MODATTN_PRECISION_FP32;
        if (opp != MODATTN_PRECISION_FP32 && in->precision != opp) {
            /* not this model's, but say whether --precision P would run here, or why not */
            const char *pn = modattn_precision_name(opp);
            if (dev && modattn_device_supports_op(dev, (modattn_op)op, reason, sizeof reason))
                printf("  %-16s -         (runs on %s with --precision %s)\n", modattn_op_name((modattn_op)op), dn, pn);
            else printf("  %-16s -         (--precision %s is refused on %s: %s)\n", modattn_op_name((modattn_op)op), pn,
                        dn, reason);
            continue;
        }
        if (why) printf("  %-16s host      (--host-fallback: %s does not run it: %s)\n", modattn_op_name((modattn_op)op), dn, why);
        else if (dev && modattn_device_supports_op(dev, (modattn_op)op, reason, sizeof reason))
            printf("  %-16s %s\n", modattn_op_name((modattn_op)op), dn);
        else printf("  %-16s -         (not needed by this model; %s: %s)\n", modattn_op_name((modattn_op)op), dn, reason);
    }
    printf("\n");
    if (!have_shape) { /* attention at the model's longest input */
        v[0] = 1, v[1] = v[2] = in->heads, v[3] = v[4] = (int64_t)in->max_tokens, v[5] = in->hidden / in->heads;
    }
    modattn_model_free(m);
    return 0;
}

int cli_cmd_explain(cli_globals *g, int argc, char **argv) {
    bool json = false, causal = false;
    const char *shape = NULL, *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn explain --shape B,Hq,Hkv,Sq,Sk,D [--causal] [--attn POLICY] [--json]\n"
                   "       modattn explain --model DIR [--shape ...]\n\n"
                   "Shows, for contiguous fp32 tensors of that shape on the --device (default: the CPU), what\n"
                   "the dispatcher would do under the\n"
                   "policy: the chosen implementation, the capable ones in the order they would be tried if\n"
                   "it failed, and every refusal with the implementation's own reason.\n"
                   "With --attn tune it first runs the shape once on random data, so the capable implementations\n"
                   "are timed (or their cached times reused) and the times are shown.\n"
                   "With --model DIR it first loads the model on the --device and says where each of the\n"
                   "encoder's ops runs (the device, or the host under --host-fallback, with the device's\n"
                   "reason), and in which precision (--precision; the linear_bf16 and linear_int8 lines say\n"
                   "whether those run on the device, or why not); the shape defaults to the model's attention at its\n"
                   "longest input.\n");
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "--causal") == 0) causal = true;
        else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) shape = argv[++i];
        else if (strncmp(argv[i], "--shape=", 8) == 0) shape = argv[i] + 8;
        else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) model = argv[++i];
        else if (strncmp(argv[i], "--model=", 8) == 0) model = argv[i] + 8;
        else {
            fprintf(stderr, "modattn explain: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    int64_t v[6];
    modattn_ctx *ctx;
    if (model && json) {
        fprintf(stderr, "modattn explain: --model has no --json form yet\n");
        return 2;
    }
    if ((shape || !model) && (!shape || parse_shape(shape, v) != 0)) {
        fprintf(stderr, "modattn explain: --shape B,Hq,Hkv,Sq,Sk,D is required (six non-negative integers), e.g. "
                        "--shape 1,12,12,128,128,32\n");
        return 2;
    }
    if (shape && (v[2] == 0 || v[1] % v[2] != 0)) {
        fprintf(stderr, "modattn explain: Hq (%lld) must be a multiple of Hkv (%lld), and Hkv > 0\n", (long long)v[1],
                (long long)v[2]);
        return 2;
    }
    if (cli_open_ctx(g, &ctx)) return 1;
    if (model && explain_model(g, ctx, model, v, shape != NULL)) return 1;
    modattn_attn_desc d = modattn_attn_desc_make(v[0], v[1], v[2], v[3], v[4], v[5], causal);
    if (g->device) { /* main() has checked the name */
        const modattn_device_iface *dev;
        if (modattn_device_lookup(g->device, &dev) == 0) d.device = dev->id;
    }
    const char *tnote = modattn_tune_note(ctx);
    if (tnote[0]) {
        char safe[800];
        fprintf(stderr, "modattn: warning: %s\n", cli_term_text(tnote, safe, sizeof safe));
    }
    if (strcmp(modattn_ctx_policy(ctx), "tune") == 0 && tune_now(ctx, &d) != 0) return 1;
    modattn_explain_entry e[64];
    size_t n = 0;
    int st = modattn_explain(ctx, &d, e, 64, &n);
    const char *none_msg = st ? modattn_last_error() : NULL;
    char desc[200];
    modattn_attn_desc_format(&d, desc, sizeof desc);
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *o = json_pack("{s:s, s:s, s:s}", "name", e[i].name, "verdict", modattn_verdict_name(e[i].verdict),
                                  "reason", e[i].reason);
            if (e[i].rank >= 0) json_object_set_new(o, "rank", json_integer(e[i].rank));
            if (e[i].measured_ms >= 0) json_object_set_new(o, "measured_ms", json_real(e[i].measured_ms));
            json_array_append_new(arr, o);
        }
        json_t *root = json_pack("{s:s, s:s, s:o}", "shape", desc, "policy", modattn_ctx_policy(ctx), "implementations", arr);
        if (none_msg) json_object_set_new(root, "error", json_string(none_msg));
        int rc = cli_print_json(root);
        return rc ? rc : (st ? 1 : 0);
    }
    printf("shape: %s\npolicy: %s\n\n", desc, modattn_ctx_policy(ctx));
    for (size_t i = 0; i < n; i++) {
        char rank[16] = "";
        if (e[i].rank >= 0) snprintf(rank, sizeof rank, "#%d", e[i].rank + 1);
        printf("  %-18s %-12s %-4s %s", e[i].name, modattn_verdict_name(e[i].verdict), rank, e[i].reason);
        if (e[i].measured_ms >= 0) printf(" (measured %.3f ms)", e[i].measured_ms);
        printf("\n");
    }
    if (st) {
        fprintf(stderr, "modattn: %s\n", none_msg);
        return 1;
    }
    return 0;
}
