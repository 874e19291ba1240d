/* cli/main.c — the `modattn` command: global options, then one subcommand. */
#include "cli/cli.h"

#include <jansson.h>
#include "modattn/store.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "device/internal_device.h"
#include "pipeline/internal_store.h"
#include "core/env.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct cli_command {
    const char *name;
    cli_cmd_fn fn;
    const char *summary;
    cli_cmd_fn mpi; /* the command's `--mpi` form (NULL: it has none) */
} cli_command;

static const cli_command k_commands[] = {
    {"backends", cli_cmd_backends, "list attention implementations, where they run and whether they are available", NULL},
    {"check", cli_cmd_check, "run the conformance suite against the fp64 oracle on this machine", NULL},
    {"explain", cli_cmd_explain, "show the dispatcher's verdict on every implementation for a shape", NULL},
    {"bench", cli_cmd_bench, "benchmark attention implementations (`modattn bench attn --help`)", NULL},
    {"embed", cli_cmd_embed, "embed texts with a sentence-transformers model, one JSON line per text", NULL},
    {"index", cli_cmd_index, "index files and folders into a document store for semantic search", cli_cmd_index_mpi},
    {"rerank", cli_cmd_rerank, "score passages against a query with a cross-encoder, best first", NULL},
    {"search", cli_cmd_search, "search an index for the chunks closest in meaning to a query", cli_cmd_search_mpi},
    {"ls", cli_cmd_ls, "list the documents a store holds: path, chunks, bytes, when", NULL},
    {"rm", cli_cmd_rm, "remove documents (a file's, or every one under a folder) from a store", NULL},
    {"export", cli_cmd_export, "write a store's chunks and vectors as JSON Lines or a NumPy .npy file", NULL},
    {"stats", cli_cmd_stats, "what a store holds: documents, vectors, bytes per vector, its index and recall", NULL},
    {"devices", cli_cmd_devices, "list the devices found (CPU, OpenCL, XLA), their memory, and what runs on each", NULL},
    {"models", cli_cmd_models, "list the models found by name (--model NAME): folders, the Hugging Face cache", NULL},
    {"serve", cli_cmd_serve, "an OpenAI-compatible embedding and search service over HTTP", NULL},
};

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s [GLOBAL OPTIONS] COMMAND [ARGS]\n\n"
            "modattn %s — portable attention and document embeddings.\n\ncommands:\n",
            prog, MODATTN_VERSION_STRING);
    for (size_t i = 0; i < sizeof k_commands / sizeof *k_commands; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f,
            "\nglobal options (before or after the command):\n"
            "  --attn POLICY      attention policy: auto (default), an implementation name, or a\n"
            "                     comma-separated preference list (see `modattn backends`)\n"
            "  --threads N        worker threads (default: all CPUs)\n"
            "  --device D         where models run: cpu (default), opencl[:N], xla[:N] (a PJRT plugin:\n"
            "                     TPU, GPU, XLA's CPU), or auto (the fastest here, measured once per\n"
            "                     model and device; `explain --model` says why) (also $MODATTN_DEVICE;\n"
            "                     see `modattn devices`)\n"
            "  --precision P      the dense layers' arithmetic: fp32 (default, exact), bf16x3 (fp32\n"
            "                     products as three bfloat16 ones, within 1e-9 of fp32's cosine: exact by\n"
            "                     our bar; needs AMX-BF16), bf16 (bfloat16 products summed in fp32; needs\n"
            "                     AVX512_BF16) or int8 (int8 weights per channel, inputs per row, int32\n"
            "                     sums; needs AVX512_VNNI): faster, refused where the CPU lacks them;\n"
            "                     vectors differ from fp32's bits, so a store indexed in one precision is\n"
            "                     searched in the same one; also $MODATTN_PRECISION)\n"
            "  --host-fallback    an encoder op the device does not run runs on the host instead of\n"
            "                     refusing the model (slow: its data crosses to the host on every call;\n"
            "                     said on stderr, counted in --stats, traced; also $MODATTN_HOST_FALLBACK=1)\n"
            "  --trace FILE       write a Chrome/Perfetto trace of the run to FILE\n"
            "  --mem-budget SIZE  fail cleanly past SIZE bytes in use (K, M, G suffixes; 0 = no limit,\n"
            "                     the default)\n"
            "  --stats            at exit, print per-implementation calls, time, GFLOP/s and fallbacks,\n"
            "                     and current/peak memory per category, to stderr (JSON with --json)\n"
            "  -h, --help         this help; `%s COMMAND --help` for a command's\n"
            "  --version          print the version\n",
            prog);
}

/* {"weights": {"current": .., "peak": ..}, ..., "total": {...}} */
static json_t *mem_json(const int64_t *cur, const int64_t *peak, int64_t cur_total, int64_t peak_total) {
    json_t *o = json_object();
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
        json_object_set_new(o, modattn_mem_category_name((modattn_mem_category)c),
                            json_pack("{s:I, s:I}", "current", (json_int_t)cur[c], "peak", (json_int_t)peak[c]));
    json_object_set_new(o, "total", json_pack("{s:I, s:I}", "current", (json_int_t)cur_total, "peak", (json_int_t)peak_total));
    return o;
}

/* The text table of one memory (the host's or a device's). */
static void mem_table(FILE *f, const int64_t *cur, const int64_t *peak, int64_t cur_total, int64_t peak_total) {
    fprintf(f, "  %-12s %14s %14s\n", "category", "current", "peak");
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
        fprintf(f, "  %-12s %14lld %14lld\n", modattn_mem_category_name((modattn_mem_category)c), (long long)cur[c],
                (long long)peak[c]);
    fprintf(f, "  %-12s %14lld %14lld\n", "total", (long long)cur_total, (long long)peak_total);
}

/* --stats --json: the same as one JSON object on its own line. */
static void cli_print_stats_json(const cli_globals *g, FILE *f) {
    json_t *impls = json_array();
    for (size_t i = 0; g->ctx && i < modattn_ctx_impl_count(g->ctx); i++) {
        modattn_impl_stats s;
        modattn_impl_info info;
        modattn__ctx_impl_stats(g->ctx, i, &s);
        modattn_ctx_impl_info(g->ctx, i, &info);
        json_array_append_new(impls, json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f}", "name", info.name, "calls",
                                               (json_int_t)s.calls, "failures", (json_int_t)s.failures, "fallbacks",
                                               (json_int_t)s.fallbacks, "total_ms", s.total_ms, "median_ms",
                                               s.median_ms, "gflops",
                                               s.total_ms > 0 ? s.flops / (s.total_ms * 1e6) : 0.0));
    }
    modattn_mem_stats m;
    modattn_mem_get_stats(&m);
    json_t *mem = mem_json(m.current, m.peak, m.current_total, m.peak_total);
    json_t *devmem = json_object();
    for (int d = 1; d < modattn_device_count(); d++) { /* devices other than the host */
        const modattn_device_iface *dev = modattn_device_get(d);
        modattn_device_mem_stats ds;
        modattn__device_mem_get_stats(dev, &ds);
        if (ds.allocations == 0 && ds.failures == 0) continue;
        char name[32];
        modattn_device_format(dev->id, name, sizeof name);
        json_object_set_new(devmem, name, mem_json(ds.current, ds.peak, ds.current_total, ds.peak_total));
    }
    json_t *root = json_pack("{s:o, s:o, s:o, s:I}", "implementations", impls, "memory", mem, "device_memory", devmem,
                             "fallbacks", (json_int_t)(g->ctx ? modattn__ctx_fallbacks(g->ctx) : 0));
    char *txt = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (modattn__json_take_failure() != 0 || !txt) cli_json_fail("--stats: writing JSON");
    else fprintf(f, "{\"stats\": %s}\n", txt);
    modattn__json_free(txt);
}

/* --stats: per implementation calls, time, GFLOP/s, fallbacks; memory per category. */
static void cli_print_stats(const cli_globals *g, FILE *f) {
    if (g->json_stats) {
        cli_print_stats_json(g, f);
        return;
    }
    if (g->ctx) {
        fprintf(f, "attention implementations:\n  %-16s %8s %8s %10s %10s %10s %9s\n", "name", "calls", "failed",
                "total ms", "median ms", "GFLOP/s", "fallbacks");
        for (size_t i = 0; i < modattn_ctx_impl_count(g->ctx); i++) {
            modattn_impl_stats s;
            modattn_impl_info info;
            modattn__ctx_impl_stats(g->ctx, i, &s);
            modattn_ctx_impl_info(g->ctx, i, &info);
            fprintf(f, "  %-16s %8llu %8llu %10.3f %10.4f %10.2f %9llu\n", info.name, (unsigned long long)s.calls,
                    (unsigned long long)s.failures, s.total_ms, s.median_ms,
                    s.total_ms > 0 ? s.flops / (s.total_ms * 1e6) : 0.0,
                    (unsigned long long)s.fallbacks);
            if (s.last_failure[0]) fprintf(f, "  %-16s last failure: %s\n", "", s.last_failure);
        }
    }
    modattn_mem_stats m;
    modattn_mem_get_stats(&m);
    fprintf(f, "memory (bytes):\n");
    mem_table(f, m.current, m.peak, m.current_total, m.peak_total);
    for (int d = 1; d < modattn_device_count(); d++) { /* devices other than the host, if used */
        const modattn_device_iface *dev = modattn_device_get(d);
        modattn_device_mem_stats ds;
        modattn__device_mem_get_stats(dev, &ds);
        if (ds.allocations == 0 && ds.failures == 0) continue;
        char name[32];
        modattn_device_format(dev->id, name, sizeof name);
        fprintf(f, "device memory on %s (bytes):\n", name);
        mem_table(f, ds.current, ds.peak, ds.current_total, ds.peak_total);
    }
    for (int d = 1; d < modattn_device_count(); d++) { /* ops run on the host for a device */
        const modattn_device_iface *dev = modattn_device_get(d);
        char name[32];
        modattn_device_format(dev->id, name, sizeof name);
        for (int op = 0; op < MODATTN_OP_COUNT; op++) {
            uint64_t n = modattn__device_fallback_count(dev, (modattn_op)op);
            if (n) fprintf(f, "host fallback for %s: %s %llu calls\n", name, modattn_op_name((modattn_op)op), (unsigned long long)n);
        }
        char text[512] = "";
        modattn_device_stats_text t = {text, sizeof text};
        if (modattn__device_control(dev, MODATTN_DEVICE_CONTROL_STATS, &t) == 0 && text[0])
            fprintf(f, "%s: %s\n", name, text);
    }
}

/* Takes a global option at argv[*i] (advancing *i past its value). 1 taken, 0 not global, -1 error. */
static int take_global(cli_globals *g, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *val = NULL;
    const char *names[] = {"--attn", "--threads", "--trace", "--mem-budget", "--device", "--precision"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) != 0) continue;
        if (a[n] == '=') val = a + n + 1;
        else if (a[n] == '\0') {
            if (*i + 1 >= argc) {
                fprintf(stderr, "modattn: %s needs a value\n", names[k]);
                return -1;
            }
            val = argv[++*i];
        } else continue;
        if (k != 1 && k != 3 && !*val) {
            fprintf(stderr, "modattn: %s: an empty value (see --help)\n", names[k]);
            return -1;
        }
        if (k == 0) g->attn = val;
        else if (k == 1) {
            long long t;
            if (cli_parse_ll("--threads (0 = all CPUs)", val, 0, 1024, &t) != 0) return -1;
            g->threads = (int)t;
        } else if (k == 2) {
            if (cli_check_output_path("--trace", val) != 0) return -1; /* now, not after the work */
            g->trace = val;
        } else if (k == 4) g->device = val;
        else if (k == 5) g->precision_text = val;
        else {
            if (modattn__parse_bytes(val, &g->mem_budget) != 0) {
                fprintf(stderr, "modattn: --mem-budget: %s\n", modattn_last_error());
                return -1;
            }
        }
        return 1;
    }
    if (strcmp(a, "--stats") == 0) {
        g->stats = true;
        return 1;
    }
    if (strcmp(a, "--host-fallback") == 0) {
        g->host_fallback = true;
        return 1;
    }
    return 0;
}

/* OpenBLAS, linked into this program for FAISS (the approximate index's training and search),
 * starts its thread pool as it loads, before main, and each of those threads spins on
 * sched_yield for about 0.1 s of CPU waiting for work. modattn's own BLAS calls run one thread
 * each inside its own pool, so for a short command that spin was most of the waste: `embed` of
 * one text with the test model took 0.27 CPU s on 2 CPUs, 0.15 without it, and the spin grows
 * with the cores (one thread each). The program owns its process, so it stops that pool first
 * thing; OpenBLAS starts it again by itself on a threaded call (FAISS's training), found at run
 * time so that a build or a host without OpenBLAS is unaffected. The library never does this:
 * it would change a host program's BLAS (the Python binding's numpy). */
static void cli_stop_idle_blas_pool(void) {
    int (*stop)(void);
    void *sym = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
    memcpy(&stop, &sym, sizeof stop); /* POSIX: a data pointer from dlsym holds the function's address */
    if (sym) (void)stop();
}

int main(int argc, char **argv) {
    cli_stop_idle_blas_pool();
    cli_stdout_init();
    /* First, before any JSON exists: jansson's allocations (tokenizer.json, config.json, the
     * safetensors header, the JSON we print) count in --stats and against --mem-budget. */
    if (modattn__json_count_allocations() != 0) return cli_fail("cannot start", MODATTN_EINVAL);
    /* SQLite's memory too (process-wide, so only a program may ask; nothing here used SQLite yet) */
    if (modattn__store_account_sqlite_memory() != 0) return cli_fail("cannot start", MODATTN_EINVAL);
    cli_globals g;
    memset(&g, 0, sizeof g);
    g.prog = "modattn";
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) {
        fprintf(stderr, "modattn: out of memory\n");
        return 1;
    }
    int nrest = 0;
    bool after_dashdash = false;
    for (int i = 1; i < argc; i++) {
        if (!after_dashdash) {
            if (strcmp(argv[i], "--") == 0) {
                after_dashdash = true;
                rest[nrest++] = argv[i];
                continue;
            }
            int r = take_global(&g, argc, argv, &i);
            if (r < 0) { free(rest); return 2; }
            if (r > 0) continue;
        }
        rest[nrest++] = argv[i];
    }
    if (nrest == 0 || (cli_is_help(rest[0]))) {
        usage(nrest == 0 ? stderr : stdout, g.prog);
        free(rest);
        return cli_finish_stdout(nrest == 0 ? 2 : 0);
    }
    if (strcmp(rest[0], "--version") == 0) {
        /* the version, what this build holds, and what this CPU offers (kernels are chosen at run time) */
        char isa[256];
        modattn__cpu_describe(isa, sizeof isa);
#if MODATTN_HAVE_MPI
        const char *mpi = "on (index --mpi, search --mpi)";
#else
        const char *mpi = "off (no libopenmpi-dev)";
#endif
        printf("modattn %s\n%smpi: %s\ncpu: %s (%s)\n", modattn_version(), modattn_build_info(), mpi,
               modattn__cpu_get()->model_name, isa);
        free(rest);
        return cli_finish_stdout(0);
    }
    const cli_command *cmd = NULL;
    for (size_t i = 0; i < sizeof k_commands / sizeof *k_commands; i++)
        if (strcmp(rest[0], k_commands[i].name) == 0) cmd = &k_commands[i];
    if (!cmd) {
        fprintf(stderr, "modattn: unknown command '%s'\n\n", rest[0]);
        usage(stderr, g.prog);
        free(rest);
        return 2;
    }
    if (modattn__env_check() != 0) { /* before any work: a usage error, as a bad flag */
        fprintf(stderr, "modattn: %s\n", modattn_last_error());
        free(rest);
        return 2;
    }
    for (int i = 1; i < nrest; i++)
        if (strcmp(rest[i], "--json") == 0) g.json_stats = true; /* --stats --json: stats as JSON too */
    if (!g.device) {
        const char *e = getenv("MODATTN_DEVICE");
        if (e && *e) g.device = e;
    }
    {
        if (modattn__env_bool("MODATTN_HOST_FALLBACK", false)) g.host_fallback = true;
    }
    if (!g.precision_text) {
        const char *e = getenv("MODATTN_PRECISION");
        if (e && *e) g.precision_text = e;
    }
    if (g.precision_text && modattn_precision_parse(g.precision_text, &g.precision) != 0) {
        fprintf(stderr, "modattn: --precision: %s\n", modattn_last_error());
        free(rest);
        return 2;
    }
    if (g.device && strcmp(cmd->name, "devices") != 0 && strcasecmp(g.device, "auto") != 0) { /* a wrong --device fails before any work */
        const modattn_device_iface *dev;
        int dst = modattn_device_lookup(g.device, &dev);
        if (dst) {
            int code = dst == MODATTN_EINVAL ? 2 : 1;
            fprintf(stderr, "modattn: --device: %s\n", modattn_last_error());
            free(rest);
            return code;
        }
    }
    if (g.attn) {
        /* a policy naming no implementation is a usage error, found before any work (a store
         * opened, a model loaded): a context of one thread is made to read the names, then freed */
        modattn_ctx_options o;
        memset(&o, 0, sizeof o);
        o.threads = 1;
        o.policy = g.attn;
        modattn_ctx *probe = NULL;
        int pst = modattn_ctx_create(&o, &probe);
        modattn_ctx_free(probe);
        if (pst) {
            int code = pst == MODATTN_EINVAL ? 2 : 1;
            cli_fail("--attn", pst);
            free(rest);
            return code;
        }
    }
    if (g.mem_budget > 0) modattn_mem_set_budget(g.mem_budget);
    if (g.trace) modattn__trace_enable(true);
    /* --mpi picks the command's distributed form, which reads the same options (and runs the plain
     * form itself for --help or on one process) */
    const bool mpi = cmd->mpi && cli_has_arg(nrest, rest, "--mpi");
    int rc = (mpi ? cmd->mpi : cmd->fn)(&g, nrest, rest);
    if (g.stats) cli_print_stats(&g, stderr);
    modattn_ctx_free(g.ctx);
    modattn__pool_free(g.pool);
    modattn_devices_shutdown();
    if (g.trace) {
        if (modattn__trace_write_json(g.trace) != 0) rc = cli_fail("trace", MODATTN_EIO);
        modattn__trace_clear();
    }
    free(rest);
    return cli_finish_stdout(rc);
}
