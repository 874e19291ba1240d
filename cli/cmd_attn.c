/* cli/cmd_attn.c — `modattn backends`, `modattn check`, `modattn explain`. */
#define _GNU_SOURCE
#include "cli/cli.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "device/internal_device.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* --------------------------------------------------------------- backends */

int cli_cmd_backends(cli_globals *g, int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn backends [--json]\n\n"
                   "Lists every attention implementation: built in, registered, or loaded as a plugin from\n"
                   "MODATTN_PLUGIN_PATH (colon-separated files or folders of *.so), with the device it runs on,\n"
                   "its priority under --attn auto, and, when it cannot run here, why. Refused plugins are\n"
                   "listed with the reason, and make the exit status 1.\n");
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
        modattn__cpu_describe(cpu, sizeof cpu);
        int rc = cli_print_json(json_pack("{s:o, s:o, s:s, s:i}", "implementations", arr, "refused_plugins", errs,
                                          "cpu_features", cpu, "threads", modattn_ctx_threads(ctx)));
        return rc ? rc : modattn_ctx_plugin_error_count(ctx) ? 1 : 0;
    }
    char cpu[256];
    modattn__cpu_describe(cpu, sizeof cpu);
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
    return ne ? 1 : 0; /* a plugin asked for and refused is a failure a script must see */
}

/* --------------------------------------------------------------- check */

/* Isolation: an implementation's run of the grid in child processes, so that a crash or a hang is
 * reported by name with the configuration it happened on, and the other implementations' results
 * stand. The child streams each outcome over a pipe; the parent tallies them, and after a crash
 * resumes at the next configuration (up to ISO_MAX_CRASHES crashes). */
#define ISO_MAX_CRASHES 3
#define ISO_HANG_S 120

static void iso_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void iso_line(int fd, const char *fmt, ...) {
    char buf[700];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r') buf[i] = ' ';
    buf[n++] = '\n';
    for (ssize_t o = 0; o < n;) {
        ssize_t w = write(fd, buf + o, (size_t)(n - o));
        if (w <= 0) return;
        o += w;
    }
}

static void iso_on_config(void *ud, int config, const char *impl) {
    (void)impl;
    iso_line(*(int *)ud, "C %d", config);
}

static void iso_on_result(void *ud, int config, const char *impl, int outcome, double ratio, const char *why) {
    (void)impl;
    iso_line(*(int *)ud, "O %d %d %.17g %.560s", config, outcome, ratio, why ? why : "");
}

static void tally(modattn_conformance_result *r, int gi, int outcome, double ratio, const char *why) {
    if (outcome == 0) r->passed++;
    else if (outcome == 1) {
        r->failed++;
        if (!r->first_failure[0]) {
            char d[300];
            modattn_conformance_describe(gi, d, sizeof d);
            snprintf(r->first_failure, sizeof r->first_failure, "config %d (%s): %s", gi, d, why);
        }
    } else {
        r->unsupported++;
        if (!r->unsupported_reason[0]) snprintf(r->unsupported_reason, sizeof r->unsupported_reason, "%s", why);
        int k = 0;
        while (k < r->nreasons && strncmp(r->reasons[k].text, why, sizeof r->reasons[k].text - 1) != 0) k++;
        if (k < r->nreasons) r->reasons[k].count++;
        else if (r->nreasons < MODATTN_CONFORMANCE_REASONS) {
            snprintf(r->reasons[k].text, sizeof r->reasons[k].text, "%s", why);
            r->reasons[k].count = 1, r->nreasons++;
        } else r->other_reasons++;
    }
    if (outcome != 2 && ratio > r->worst_ratio) r->worst_ratio = ratio;
}

/* 0, or the exit status after saying why (the child could not start the suite) */
static int check_isolated(cli_globals *g, const modattn_conformance_options *base, const char *name,
                          modattn_conformance_result *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    int grid = modattn_conformance_grid_size();
    if (base->max_configs > 0 && base->max_configs < grid) grid = base->max_configs;
    int next = 0, crashes = 0;
    while (next < grid && crashes < ISO_MAX_CRASHES) {
        int fds[2];
        if (pipe(fds) != 0) {
            fprintf(stderr, "modattn check: pipe: %s\n", strerror(errno));
            return 1;
        }
        fflush(stdout), fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "modattn check: fork: %s\n", strerror(errno));
            close(fds[0]), close(fds[1]);
            return 1;
        }
        if (pid == 0) { /* the child: a context of its own (the parent's pool threads are not here) */
            close(fds[0]);
            int fd = fds[1];
            g->ctx = NULL, g->pool = NULL;
            modattn_ctx *ctx;
            if (cli_open_ctx(g, &ctx)) {
                iso_line(fd, "E cannot start: %s", modattn_last_error());
                _exit(3);
            }
            modattn_conformance_options o = *base;
            o.only = name, o.first_config = next, o.log = NULL;
            o.on_config = iso_on_config, o.on_result = iso_on_result, o.ud = &fd;
            modattn_conformance_result res[1];
            size_t n = 0;
            int st = modattn_conformance_run(ctx, &o, res, 1, &n);
            if (st) iso_line(fd, "E %s", modattn_last_error());
            _exit(st ? 3 : 0);
        }
        close(fds[1]);
        FILE *f = fdopen(fds[0], "r");
        int last = next, status = 0;
        bool hung = false;
        char line[800], err[600] = "";
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        while (f) {
            if (poll(&pfd, 1, ISO_HANG_S * 1000) == 0) { /* no word for that long: hung */
                hung = true;
                kill(pid, SIGKILL);
                break;
            }
            if (!fgets(line, sizeof line, f)) break;
            line[strcspn(line, "\n")] = '\0';
            int gi, outcome, off = 0;
            double ratio;
            if (line[0] == 'C' && sscanf(line, "C %d", &gi) == 1) last = gi;
            else if (line[0] == 'O' && sscanf(line, "O %d %d %lf %n", &gi, &outcome, &ratio, &off) >= 3) {
                tally(r, gi, outcome, ratio, off ? line + off : "");
                last = gi + 1;
            } else if (line[0] == 'E') snprintf(err, sizeof err, "%s", line + 2);
        }
        if (f) fclose(f);
        else close(fds[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (hung || WIFSIGNALED(status)) {
            crashes++;
            char d[300], what[160];
            modattn_conformance_describe(last, d, sizeof d);
            if (hung) snprintf(what, sizeof what, "hung (no progress for %d s)", ISO_HANG_S);
            else snprintf(what, sizeof what, "crashed (signal %d, %s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
            fprintf(stderr, "FAIL implementation %s %s on config %d: %s\n", name, what, last, d);
            r->failed++;
            if (!r->first_failure[0])
                snprintf(r->first_failure, sizeof r->first_failure, "implementation %s %s on config %d: %s", name, what,
                         last, d);
            next = last + 1;
            if (crashes == ISO_MAX_CRASHES && next < grid)
                fprintf(stderr, "modattn check: %s: stopped after %d crashes; configurations %d..%d not run\n", name,
                        ISO_MAX_CRASHES, next, grid - 1);
            continue;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
        fprintf(stderr, "modattn check: %s: %s\n", name, err[0] ? err : "the isolated run failed");
        return 1;
    }
    return 0;
}

static bool is_plugin(const modattn_impl_info *info) {
    return strcmp(info->origin, "builtin") != 0 && strcmp(info->origin, "registered") != 0;
}

int cli_cmd_check(cli_globals *g, int argc, char **argv) {
    bool json = false, verbose = false;
    int isolate = -1; /* -1: plugins isolated, built-ins in process */
    uint64_t seed = 0;
    const char *only = NULL, *plugin = NULL;
    int max_configs = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn check [--backend NAME | --plugin PATH.so] [--configs N] [--seed N]\n"
                   "                     [--isolate | --no-isolate] [--verbose] [--json]\n\n"
                   "Runs the conformance suite (%d generated configurations) on every attention\n"
                   "implementation, or only NAME, against the fp64 oracle. An implementation passes a\n"
                   "configuration when its error is at most twice a naive fp32 implementation's plus 1e-6,\n"
                   "with no NaN, guard regions untouched, inputs unchanged and nothing written outside a\n"
                   "workspace of exactly the bytes it asked for; 'unsupported' is counted apart, per reason.\n"
                   "--plugin PATH.so   load that plugin alone and check its implementations (a plugin's CI)\n"
                   "--isolate          run each implementation in child processes: a crash or a hang is\n"
                   "                   reported by name with its configuration, the others' results stand\n"
                   "                   (the default for plugins; built-ins run in this process)\n"
                   "--no-isolate       everything in this process\n"
                   "--seed changes the random inputs (the configurations stay the same).\n"
                   "Implementations on a device (OpenCL, XLA) run there, through device buffers with the same\n"
                   "guard regions: on the --device of their kind (e.g. --device opencl:1), else its first.\n"
                   "Exit status 1 if any configuration failed (or a plugin was refused at load).\n",
                   modattn_conformance_grid_size());
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) verbose = true;
        else if (strcmp(argv[i], "--isolate") == 0) isolate = 1;
        else if (strcmp(argv[i], "--no-isolate") == 0) isolate = 0;
        else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) only = argv[++i];
        else if (strncmp(argv[i], "--backend=", 10) == 0) only = argv[i] + 10;
        else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) plugin = argv[++i];
        else if (strncmp(argv[i], "--plugin=", 9) == 0) plugin = argv[i] + 9;
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
    char real[PATH_MAX] = "";
    if (plugin) {
        struct stat st;
        if (stat(plugin, &st) != 0 || !S_ISREG(st.st_mode)) {
            fprintf(stderr, "modattn check: --plugin %s: %s\n", plugin, stat(plugin, &st) != 0 ? strerror(errno) : "not a file");
            return 2;
        }
        if (!realpath(plugin, real)) snprintf(real, sizeof real, "%s", plugin);
        setenv("MODATTN_PLUGIN_PATH", real, 1); /* that plugin alone, in this process and its children */
    }
    modattn_ctx *ctx;
    if (cli_open_ctx(g, &ctx)) return 1;
    modattn_conformance_options o;
    memset(&o, 0, sizeof o);
    o.max_configs = max_configs;
    o.log = stderr;
    o.verbose = verbose;
    o.seed = seed;
    if (g->device) { /* main() has checked the name */
        const modattn_device_iface *dev;
        if (modattn_device_lookup(g->device, &dev) == 0) o.device_index = dev->id.index;
    }
    /* which implementations, and which of them in child processes */
    const size_t nimpl = modattn_ctx_impl_count(ctx);
    size_t which[64], nw = 0;
    for (size_t i = 0; i < nimpl && nw < 64; i++) {
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, i, &info);
        if (only && strcmp(only, info.name) != 0) continue;
        if (plugin && (!is_plugin(&info) || strcmp(info.origin, real) != 0)) continue;
        which[nw++] = i;
    }
    const size_t nerr = modattn_ctx_plugin_error_count(ctx);
    if (plugin && nerr) {
        for (size_t i = 0; i < nerr; i++) fprintf(stderr, "modattn check: plugin refused: %s\n", modattn_ctx_plugin_error(ctx, i));
        return 1;
    }
    if (nw == 0) {
        if (only) {
            long idx = modattn_ctx_find(ctx, only);
            (void)idx;
            fprintf(stderr, "modattn check: no implementation named '%s'%s\n", only,
                    nerr ? " (a plugin was refused at load: see `modattn backends`)" : "");
            return 2;
        }
        fprintf(stderr, "modattn check: --plugin %s holds no implementation\n", plugin ? plugin : "");
        return 1;
    }
    modattn_conformance_result res[64];
    size_t n = 0;
    for (size_t k = 0; k < nw; k++) {
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, which[k], &info);
        const bool iso = isolate == 1 || (isolate == -1 && is_plugin(&info));
        if (iso) {
            int rc = check_isolated(g, &o, info.name, &res[n]);
            if (rc) return rc;
            n++;
            continue;
        }
        o.only = info.name;
        size_t got = 0;
        int st = modattn_conformance_run(ctx, &o, &res[n], 1, &got);
        if (st) return cli_fail("check", st);
        n += got;
    }
    int failed = 0;
    for (size_t i = 0; i < n; i++) failed += res[i].failed;
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *r = json_pack("{s:s, s:i, s:i, s:i}", "name", res[i].name, "passed", res[i].passed, "failed",
                                  res[i].failed, "unsupported", res[i].unsupported);
            /* JSON has no infinity: a NaN failure's ratio is null */
            json_object_set_new(r, "worst_error_ratio",
                                isfinite(res[i].worst_ratio) ? json_real(res[i].worst_ratio) : json_null());
            if (res[i].first_failure[0]) json_object_set_new(r, "first_failure", json_string(res[i].first_failure));
            if (res[i].unsupported) {
                json_object_set_new(r, "unsupported_reason", json_string(res[i].unsupported_reason));
                json_t *why = json_object();
                for (int k = 0; k < res[i].nreasons; k++)
                    json_object_set_new(why, res[i].reasons[k].text, json_integer(res[i].reasons[k].count));
                if (res[i].other_reasons) json_object_set_new(why, "(other reasons)", json_integer(res[i].other_reasons));
                json_object_set_new(r, "unsupported_by_reason", why);
            }
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
        for (int k = 0; k < res[i].nreasons; k++)
            printf("    unsupported %4d: %s\n", res[i].reasons[k].count, res[i].reasons[k].text);
        if (res[i].other_reasons) printf("    unsupported %4d: (other reasons)\n", res[i].other_reasons);
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
    float *q = modattn__malloc((size_t)nq * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    float *k = modattn__malloc((size_t)nk * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    float *v = modattn__malloc((size_t)nk * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    float *o = modattn__malloc((size_t)nq * 4 + 4, MODATTN_MEM_ACTIVATIONS);
    int st = (q && k && v && o) ? 0 : modattn__mem_last_status();
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
    if (dev && modattn__device_has_graph(dev)) { /* no ops one by one: one compiled program */
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
    const char *tnote = modattn__tune_note(ctx);
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
