/* cli/cmd_models.c — models found, not typed: `--model NAME` resolves a name such as all-MiniLM-L6-v2
 * or sentence-transformers/all-MiniLM-L6-v2 to a folder, and `modattn models` lists what can be
 * found. Where, in order: a path that exists as given; every folder on $MODATTN_MODELS (a path
 * list); the Hugging Face cache as sentence-transformers leaves it on disk
 * ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub: models--ORG--NAME/snapshots/REV,
 * the revision refs/main names; nothing is downloaded); the installed data folder
 * (<exe>/../share/modattn/models, ~/.local/share/modattn/models) and a development build's .models. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

static bool is_model_dir(const char *dir) {
    char p[PATH_MAX + 32];
    struct stat st;
    snprintf(p, sizeof p, "%s/config.json", dir);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* the folders that may hold models by name (not the HF cache, whose layout is its own) */
static int model_roots(char roots[][PATH_MAX], int max) {
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

static void hf_hub(char *buf, size_t len) {
    const char *c = getenv("HF_HUB_CACHE"), *h = getenv("HF_HOME"), *home = getenv("HOME");
    if (c && *c) snprintf(buf, len, "%s", c);
    else if (h && *h) snprintf(buf, len, "%s/hub", h);
    else if (home && *home) snprintf(buf, len, "%s/.cache/huggingface/hub", home);
    else buf[0] = '\0';
}

/* models--ORG--NAME's snapshot: the one refs/main names, else the newest that holds a model */
static bool hf_snapshot(const char *repo_dir, char *out, size_t len) {
    char p[PATH_MAX + 64], rev[128] = "";
    snprintf(p, sizeof p, "%s/refs/main", repo_dir);
    FILE *f = fopen(p, "r");
    if (f) {
        if (fgets(rev, sizeof rev, f)) rev[strcspn(rev, "\r\n")] = '\0';
        fclose(f);
    }
    if (rev[0] && !strchr(rev, '/')) {
        snprintf(out, len, "%s/snapshots/%s", repo_dir, rev);
        if (is_model_dir(out)) return true;
    }
    snprintf(p, sizeof p, "%s/snapshots/*", repo_dir);
    glob_t g;
    bool found = false;
    time_t best = 0;
    if (glob(p, GLOB_ONLYDIR, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (is_model_dir(g.gl_pathv[i]) && stat(g.gl_pathv[i], &st) == 0 && (!found || st.st_mtime > best)) {
                snprintf(out, len, "%s", g.gl_pathv[i]);
                best = st.st_mtime, found = true;
            }
        }
        globfree(&g);
    }
    return found;
}

const char *cli_model_resolve(const char *name, char *buf, size_t len) {
    if (!name || !*name || is_model_dir(name) || name[0] == '/' || strncmp(name, "./", 2) == 0 ||
        strncmp(name, "../", 3) == 0)
        return name; /* a path: as given (its errors are the loader's) */
    /* NAME or ORG/NAME: the last part is the folder name on disk */
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    if (slash && strchr(name, '/') != slash) return name; /* deeper paths are paths */
    char roots[12][PATH_MAX];
    int n = model_roots(roots, 12);
    for (int i = 0; i < n; i++) {
        snprintf(buf, len, "%s/%s", roots[i], base);
        if (is_model_dir(buf)) return buf;
    }
    char hub[PATH_MAX];
    hf_hub(hub, sizeof hub);
    if (hub[0]) {
        char repo[PATH_MAX + 300];
        if (slash) { /* ORG/NAME */
            snprintf(repo, sizeof repo, "%s/models--%.*s--%s", hub, (int)(slash - name), name, base);
            if (hf_snapshot(repo, buf, len)) return buf;
        } else { /* NAME: sentence-transformers' first, then any organisation's */
            snprintf(repo, sizeof repo, "%s/models--sentence-transformers--%s", hub, base);
            if (hf_snapshot(repo, buf, len)) return buf;
            char pat[PATH_MAX + 300];
            snprintf(pat, sizeof pat, "%s/models--*--%s", hub, base);
            glob_t g;
            if (glob(pat, GLOB_ONLYDIR, NULL, &g) == 0) {
                for (size_t k = 0; k < g.gl_pathc; k++)
                    if (hf_snapshot(g.gl_pathv[k], buf, len)) {
                        globfree(&g);
                        return buf;
                    }
                globfree(&g);
            }
        }
    }
    return name; /* not found by name: the loader says the folder is missing */
}

/* ---- modattn models */

static int64_t dir_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) total += dir_bytes(p);
        else total += st.st_size;
    }
    closedir(d);
    return total;
}

/* what the folder says of itself: hidden size, pooling modes (1_Pooling/config.json) */
static void describe(const char *dir, int *hidden, char *pool, size_t plen, int *dim, bool *normalize) {
    char p[PATH_MAX + 64];
    *hidden = 0, *dim = 0, *normalize = false;
    snprintf(pool, plen, "?");
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_error_t err;
    json_t *c = json_load_file(p, 0, &err);
    json_t *hs = c ? json_object_get(c, "hidden_size") : NULL;
    if (json_is_integer(hs)) *hidden = (int)json_integer_value(hs);
    json_decref(c);
    snprintf(p, sizeof p, "%s/1_Pooling/config.json", dir);
    json_t *pc = json_load_file(p, 0, &err);
    if (pc) {
        static const char *const modes[][2] = {{"pooling_mode_cls_token", "cls"},
                                               {"pooling_mode_max_tokens", "max"},
                                               {"pooling_mode_mean_tokens", "mean"},
                                               {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"},
                                               {"pooling_mode_weightedmean_tokens", "weightedmean"},
                                               {"pooling_mode_lasttoken", "lasttoken"}};
        size_t o = 0;
        int k = 0;
        pool[0] = '\0';
        for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
            if (json_is_true(json_object_get(pc, modes[i][0]))) {
                o += (size_t)snprintf(pool + o, o < plen ? plen - o : 0, "%s%s", k ? "+" : "", modes[i][1]);
                k++;
            }
        if (!k) snprintf(pool, plen, "?");
        *dim = *hidden * (k ? k : 1);
        json_decref(pc);
    }
    snprintf(p, sizeof p, "%s/modules.json", dir);
    json_t *m = json_load_file(p, 0, &err);
    for (size_t i = 0; m && i < json_array_size(m); i++) {
        json_t *t = json_object_get(json_array_get(m, i), "type");
        if (json_is_string(t) && strstr(json_string_value(t), "Normalize")) *normalize = true;
    }
    json_decref(m);
}

typedef struct found {
    char name[256], dir[PATH_MAX], where[32];
} found;

static void add(found *f, size_t *n, size_t max, const char *name, const char *dir, const char *where) {
    char real[PATH_MAX];
    if (!realpath(dir, real)) return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(f[i].dir, real) == 0) return;
    if (*n == max) return;
    snprintf(f[*n].name, sizeof f[*n].name, "%s", name);
    snprintf(f[*n].dir, sizeof f[*n].dir, "%s", real);
    snprintf(f[*n].where, sizeof f[*n].where, "%s", where);
    (*n)++;
}

int cli_cmd_models(cli_globals *g, int argc, char **argv) {
    (void)g;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn models [--json]\n\n"
                   "Lists the models modattn can find by name (--model NAME), with their dimension, pooling\n"
                   "and size on disk. Where, in order: the folders on $MODATTN_MODELS (a path list), the\n"
                   "installed data folder (<prefix>/share/modattn/models, ~/.local/share/modattn/models), a\n"
                   "development build's .models, and the Hugging Face cache as sentence-transformers leaves\n"
                   "it ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; nothing is\n"
                   "downloaded). --model ORG/NAME or NAME resolves through the same places.\n");
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) json = true;
        else {
            fprintf(stderr, "modattn models: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    enum { MAXF = 256 };
    found *f = calloc(MAXF, sizeof *f);
    if (!f) {
        fprintf(stderr, "modattn models: out of memory\n");
        return 1;
    }
    size_t n = 0;
    char roots[12][PATH_MAX];
    int nr = model_roots(roots, 12);
    for (int r = 0; r < nr; r++) {
        DIR *d = opendir(roots[r]);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[PATH_MAX + 300];
            snprintf(p, sizeof p, "%s/%s", roots[r], e->d_name);
            if (is_model_dir(p)) add(f, &n, MAXF, e->d_name, p, "folder");
        }
        closedir(d);
    }
    char hub[PATH_MAX];
    hf_hub(hub, sizeof hub);
    if (hub[0]) {
        char pat[PATH_MAX + 32];
        snprintf(pat, sizeof pat, "%s/models--*", hub);
        glob_t gl;
        if (glob(pat, GLOB_ONLYDIR, NULL, &gl) == 0) {
            for (size_t i = 0; i < gl.gl_pathc; i++) {
                char snap[PATH_MAX], name[256];
                if (!hf_snapshot(gl.gl_pathv[i], snap, sizeof snap)) continue;
                const char *b = strrchr(gl.gl_pathv[i], '/');
                b = b ? b + 1 + strlen("models--") : gl.gl_pathv[i];
                snprintf(name, sizeof name, "%s", b);
                char *sep = strstr(name, "--");
                if (sep) *sep = '/', memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
                add(f, &n, MAXF, name, snap, "hf-cache");
            }
            globfree(&gl);
        }
    }
    int rc = 0;
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            int hidden, dim;
            bool norm;
            char pool[96];
            describe(f[i].dir, &hidden, pool, sizeof pool, &dim, &norm);
            json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:b, s:I}", "name", f[i].name, "where", f[i].where,
                                  "dimension", dim, "pooling", pool, "normalize", norm, "bytes",
                                  (json_int_t)dir_bytes(f[i].dir));
            if (o) cli_json_set_path(o, "path", f[i].dir);
            json_array_append_new(arr, o);
        }
        rc = cli_print_json(json_pack("{s:o}", "models", arr));
    } else if (n == 0) {
        printf("no model found (see modattn models --help for where it looks; `make model` lays one out)\n");
    } else {
        printf("%-36s %5s %-18s %8s  %s\n", "name", "dim", "pooling", "size", "path");
        for (size_t i = 0; i < n; i++) {
            int hidden, dim;
            bool norm;
            char pool[96], pb[PATH_MAX * 2], nb[600];
            describe(f[i].dir, &hidden, pool, sizeof pool, &dim, &norm);
            if (norm) strncat(pool, "+norm", sizeof pool - strlen(pool) - 1);
            printf("%-36s %5d %-18s %6.1f MB  %s\n", cli_term_text(f[i].name, nb, sizeof nb), dim, pool,
                   (double)dir_bytes(f[i].dir) / 1e6, cli_term_text(f[i].dir, pb, sizeof pb));
        }
    }
    free(f);
    return cli_finish_stdout(rc);
}
