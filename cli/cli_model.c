/* cli/cli_model.c — where the commands find the model, how they load it (on the global --device,
 * with --host-fallback said on stderr), and how they show stored paths. Shared by every command
 * that loads a model (embed, index, search, bench, explain), so they all look in the same places
 * in the same order. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/store.h"

#define CLI_DEFAULT_MODEL "all-MiniLM-L6-v2"

/* The places the default model is looked for, in order, after --model and MODATTN_MODEL: beside a
 * development build (<exe>/../.models), where `make install` puts it (<exe>/../share/modattn/models),
 * the user's data folder, and the current folder's .models. */
const char *cli_model_dir(const char *given, char *buf, size_t len) {
    const char *env = getenv("MODATTN_MODEL");
    if (given || (env && *env)) return buf && len ? cli_model_resolve(given ? given : env, buf, len) : given ? given : env;
    if (!buf || !len) return "./.models/" CLI_DEFAULT_MODEL;
    char exe[PATH_MAX] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        else exe[0] = '\0';
    } else {
        exe[0] = '\0';
    }
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char cand[4][PATH_MAX];
    int nc = 0;
    if (exe[0]) {
        snprintf(cand[nc++], PATH_MAX, "%.3000s/../.models/" CLI_DEFAULT_MODEL, exe);
        snprintf(cand[nc++], PATH_MAX, "%.3000s/../share/modattn/models/" CLI_DEFAULT_MODEL, exe);
    }
    if (xdg && *xdg) snprintf(cand[nc++], PATH_MAX, "%.3000s/modattn/models/" CLI_DEFAULT_MODEL, xdg);
    else if (home && *home) snprintf(cand[nc++], PATH_MAX, "%.3000s/.local/share/modattn/models/" CLI_DEFAULT_MODEL, home);
    for (int i = 0; i < nc; i++)
        if (access(cand[i], F_OK) == 0) {
            snprintf(buf, len, "%s", cand[i]);
            return buf;
        }
    return "./.models/" CLI_DEFAULT_MODEL;
}

const char *cli_model_dir_for_store(const char *given, modattn_store *store, const char *db, char *buf, size_t len) {
    const char *env = getenv("MODATTN_MODEL");
    if (given || (env && *env) || !buf || !len) return cli_model_dir(given, buf, len);
    modattn_store *own = NULL;
    if (!store && db && access(db, F_OK) == 0 && modattn_store_open(db, MODATTN_STORE_READONLY, &own) == 0) store = own;
    int st = store ? modattn_store_get_model_dir(store, buf, len) : MODATTN_ENOTFOUND;
    modattn_store_close(own);
    if (st == 0 && access(buf, F_OK) == 0) return buf;
    modattn_clear_error();
    return cli_model_dir(NULL, buf, len);
}

const char *cli_rel_path(const char *abs, char *buf, size_t len) {
    char cwd[PATH_MAX];
    if (!abs || abs[0] != '/' || !getcwd(cwd, sizeof cwd)) return abs;
    size_t n = strlen(cwd);
    if (n == 1) return abs + 1; /* cwd is "/" */
    if (strncmp(abs, cwd, n) != 0 || abs[n] != '/') return abs;
    snprintf(buf, len, "%s", abs + n + 1);
    return buf;
}

int cli_load_model(cli_globals *g, modattn_ctx *ctx, const char *dir, modattn_model **out) {
    modattn_model_options o;
    memset(&o, 0, sizeof o);
    o.device = g->device;
    o.pool = g->pool; /* the ctx's pool too: one set of threads in the process */
    o.host_fallback = g->host_fallback;
    o.few_inputs = g->few_inputs;
    o.precision = g->precision;
    int st = modattn_model_load_ex(ctx, dir, &o, out);
    if (st) return st;
    cli_explain_fallbacks(*out, stderr);
    return 0;
}

void cli_explain_fallbacks(const modattn_model *m, FILE *f) {
    const modattn_model_info *in = modattn_model_get_info(m);
    char name[32];
    modattn_device_format(in->device, name, sizeof name);
    for (int op = 0; op < MODATTN_OP_COUNT; op++)
        if ((in->host_fallback_ops >> op) & 1u)
            fprintf(f, "modattn: %s: op '%s' runs on the host (--host-fallback): %s does not run it: %s\n", in->name,
                    modattn_op_name((modattn_op)op), name, modattn_model_fallback_reason(m, op));
}
