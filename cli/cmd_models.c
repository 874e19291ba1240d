/* cli/cmd_models.c — models found, not typed: `--model NAME` resolves a name such as all-MiniLM-L6-v2
 * or sentence-transformers/all-MiniLM-L6-v2 to a folder, and `modattn models` lists what can be
 * found. Where, in order: a path that exists as given; every folder on $MODATTN_MODELS (a path
 * list); the Hugging Face cache as sentence-transformers leaves it on disk
 * ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub: models--ORG--NAME/snapshots/REV,
 * the revision refs/main names; nothing is downloaded); the installed data folder
 * (<exe>/../share/modattn/models, ~/.local/share/modattn/models) and a development build's .models.
 * The resolution itself is cli/cli_model.c's (every command resolves --model the same way). */
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
    int nr = cli_model_roots(roots, 12);
    for (int r = 0; r < nr; r++) {
        DIR *d = opendir(roots[r]);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[PATH_MAX + 300];
            snprintf(p, sizeof p, "%s/%s", roots[r], e->d_name);
            if (cli_is_model_dir(p)) add(f, &n, MAXF, e->d_name, p, "folder");
        }
        closedir(d);
    }
    char hub[PATH_MAX];
    cli_hf_hub(hub, sizeof hub);
    if (hub[0]) {
        char pat[PATH_MAX + 32];
        snprintf(pat, sizeof pat, "%s/models--*", hub);
        glob_t gl;
        if (glob(pat, GLOB_ONLYDIR, NULL, &gl) == 0) {
            for (size_t i = 0; i < gl.gl_pathc; i++) {
                char snap[PATH_MAX], name[256];
                if (!cli_hf_snapshot(gl.gl_pathv[i], snap, sizeof snap)) continue;
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
