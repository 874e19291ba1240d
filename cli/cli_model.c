/* cli/cli_model.c — where the commands find the model, how they load it (on the global --device,
 * with --host-fallback said on stderr), and how they show stored paths. Shared by every command
 * that loads a model (embed, index, search, bench, explain), so they all look in the same places
 * in the same order; and the library context they all share (cli_open_ctx). */
#define _GNU_SOURCE /* glob's GLOB_ONLYDIR */
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "pipeline/internal_store.h"

#define CLI_DEFAULT_MODEL "all-MiniLM-L6-v2"

/* ---- a model by name (`--model NAME`, `modattn models`) */

bool cli_is_model_dir(const char *dir) {
    char p[PATH_MAX + 32];
    struct stat st;
    snprintf(p, sizeof p, "%s/config.json", dir);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* the folders that may hold models by name (not the HF cache, whose layout is its own) */
int cli_model_roots(char roots[][PATH_MAX], int max) {
    int n = 0;
    const char *env = getenv("MODATTN_MODELS");
    if (env && *env) {
        char *copy = strdup(env), *save = NULL;
        for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p && n < max; p = strtok_r(NULL, ":", &save))
            snprintf(roots[n++], PATH_MAX, "%s", p);
        free(copy);
    }
    char exe[PATH_MAX] = "";
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        if (n < max) snprintf(roots[n++], PATH_MAX, "%.3000s/../share/modattn/models", exe);
        if (n < max) snprintf(roots[n++], PATH_MAX, "%.3000s/../.models", exe);
    }
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (n < max && xdg && *xdg) snprintf(roots[n++], PATH_MAX, "%.3000s/modattn/models", xdg);
    else if (n < max && home && *home) snprintf(roots[n++], PATH_MAX, "%.3000s/.local/share/modattn/models", home);
    if (n < max) snprintf(roots[n++], PATH_MAX, "./.models");
    return n;
}

void cli_hf_hub(char *buf, size_t len) {
    const char *c = getenv("HF_HUB_CACHE"), *h = getenv("HF_HOME"), *home = getenv("HOME");
    if (c && *c) snprintf(buf, len, "%s", c);
    else if (h && *h) snprintf(buf, len, "%s/hub", h);
    else if (home && *home) snprintf(buf, len, "%s/.cache/huggingface/hub", home);
    else buf[0] = '\0';
}

/* models--ORG--NAME's snapshot: the one refs/main names, else the newest that holds a model */
bool cli_hf_snapshot(const char *repo_dir, char *out, size_t len) {
    char p[PATH_MAX + 64], rev[128] = "";
    snprintf(p, sizeof p, "%s/refs/main", repo_dir);
    FILE *f = fopen(p, "r");
    if (f) {
        if (fgets(rev, sizeof rev, f)) rev[strcspn(rev, "\r\n")] = '\0';
        fclose(f);
    }
    if (rev[0] && !strchr(rev, '/')) {
        snprintf(out, len, "%s/snapshots/%s", repo_dir, rev);
        if (cli_is_model_dir(out)) return true;
    }
    snprintf(p, sizeof p, "%s/snapshots/*", repo_dir);
    glob_t g;
    bool found = false;
    time_t best = 0;
    if (glob(p, GLOB_ONLYDIR, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (cli_is_model_dir(g.gl_pathv[i]) && stat(g.gl_pathv[i], &st) == 0 && (!found || st.st_mtime > best)) {
                snprintf(out, len, "%s", g.gl_pathv[i]);
                best = st.st_mtime, found = true;
            }
        }
        globfree(&g);
    }
    return found;
}

const char *cli_model_resolve(const char *name, char *buf, size_t len) {
    if (!name || !*name || cli_is_model_dir(name) || name[0] == '/' || strncmp(name, "./", 2) == 0 ||
        strncmp(name, "../", 3) == 0)
        return name; /* a path: as given (its errors are the loader's) */
    /* NAME or ORG/NAME: the last part is the folder name on disk */
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    if (slash && strchr(name, '/') != slash) return name; /* deeper paths are paths */
    char roots[12][PATH_MAX];
    int n = cli_model_roots(roots, 12);
    for (int i = 0; i < n; i++) {
        snprintf(buf, len, "%s/%s", roots[i], base);
        if (cli_is_model_dir(buf)) return buf;
    }
    char hub[PATH_MAX];
    cli_hf_hub(hub, sizeof hub);
    if (hub[0]) {
        char repo[PATH_MAX + 300];
        if (slash) { /* ORG/NAME */
            snprintf(repo, sizeof repo, "%s/models--%.*s--%s", hub, (int)(slash - name), name, base);
            if (cli_hf_snapshot(repo, buf, len)) return buf;
        } else { /* NAME: sentence-transformers' first, then any organisation's */
            snprintf(repo, sizeof repo, "%s/models--sentence-transformers--%s", hub, base);
            if (cli_hf_snapshot(repo, buf, len)) return buf;
            char pat[PATH_MAX + 300];
            snprintf(pat, sizeof pat, "%s/models--*--%s", hub, base);
            glob_t g;
            if (glob(pat, GLOB_ONLYDIR, NULL, &g) == 0) {
                for (size_t k = 0; k < g.gl_pathc; k++)
                    if (cli_hf_snapshot(g.gl_pathv[k], buf, len)) {
                        globfree(&g);
                        return buf;
                    }
                globfree(&g);
            }
        }
    }
    return name; /* not found by name: the loader says the folder is missing */
}


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
    int st = store ? modattn__store_get_model_dir(store, buf, len) : MODATTN_ENOTFOUND;
    modattn_store_close(own);
    if (st == 0 && access(buf, F_OK) == 0) return buf;
    if (st == 0 && buf[0]) {
        /* recorded, and gone: say where it was and how to point at its new place, before the
         * default model is tried (a store of another model is then refused, naming both) */
        char shown[PATH_MAX + 64];
        fprintf(stderr,
                "modattn: note: this store's model was loaded from %s, which is not there any more (moved or "
                "removed): give its new place with --model DIR (or MODATTN_MODEL); `modattn index --model DIR` "
                "records it in the store\n",
                cli_term_text(buf, shown, sizeof shown));
    }
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

int cli_open_ctx(cli_globals *g, modattn_ctx **out) {
    if (g->ctx) {
        *out = g->ctx;
        return 0;
    }
    int st = g->pool ? 0 : modattn__pool_create(g->threads, &g->pool);
    if (st) return cli_fail("cannot start", st);
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = g->threads;
    o.policy = g->attn;
    o.pool = g->pool;
    st = modattn_ctx_create(&o, out);
    if (st) return cli_fail("cannot start", st);
    g->ctx = *out;
    return 0;
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
