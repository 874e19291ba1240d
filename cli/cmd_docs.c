/* cli/cmd_docs.c — managing a store's documents: `modattn ls` lists them (path, chunks, bytes, the
 * file's time when indexed), `modattn rm PATH...` removes documents (a folder: every document under
 * it; an archive: its members, "a.zip!/inner/file.txt") and brings the vector file and the ANN
 * index up to date, as `index --prune` does. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/ann.h"
#include "modattn/store.h"
#include "pipeline/internal_store.h"
#include "pipeline/store_notes.h"

typedef struct doc_list {
    char **v;
    size_t n, cap;
    const char *prefix; /* NULL: every document */
    int st;
} doc_list;

static bool under(const char *path, const char *root) {
    size_t k = strlen(root);
    while (k > 1 && root[k - 1] == '/') k--;
    /* under a folder, or a member of an archive (or of a folder inside one): "a.zip!/..." */
    return strncmp(path, root, k) == 0 && (path[k] == '\0' || path[k] == '/' || (path[k] == '!' && path[k + 1] == '/'));
}

/* Stored paths are absolute and real: PATH as the file system names it now, or (a file already
 * gone, an archive's member) made absolute from the current folder, its archive's part real. */
static void stored_form(const char *path, char *abs, size_t len) {
    if (realpath(path, abs)) return;
    const char *bang = strstr(path, "!/");
    if (bang) {
        char arch[PATH_MAX], real[PATH_MAX];
        snprintf(arch, sizeof arch, "%.*s", (int)(bang - path), path);
        if (realpath(arch, real)) {
            snprintf(abs, len, "%.2000s%.2000s", real, bang);
            return;
        }
    }
    char cwd[PATH_MAX];
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(abs, len, "%s", path);
    else snprintf(abs, len, "%.2000s/%.2000s", cwd, path);
}

static int collect(void *ud, const char *path) {
    doc_list *l = ud;
    if (l->prefix && !under(path, l->prefix)) return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return l->st = MODATTN_ENOMEM;
        l->v = nv, l->cap = nc;
    }
    if (!(l->v[l->n] = strdup(path))) return l->st = MODATTN_ENOMEM;
    l->n++;
    return 0;
}

static void list_free(doc_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static const char *opt_db(int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (strncmp(a, "--db=", 5) == 0) return a + 5;
    if (strcmp(a, "--db") == 0 && *i + 1 < argc) return argv[++*i];
    return NULL;
}

int cli_cmd_ls(cli_globals *g, int argc, char **argv) {
    (void)g;
    const char *db = MODATTN_STORE_DEFAULT_PATH, *prefix = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_is_help(argv[i])) {
            printf("usage: modattn ls [--db FILE] [--json] [FOLDER]\n\n"
                   "Lists the documents a store holds (only those under FOLDER when given): path, chunks,\n"
                   "bytes, and the file's modification time when it was indexed.\n"
                   "  --db FILE   the store (default ./" MODATTN_STORE_DEFAULT_PATH ")\n"
                   "  --json      {\"documents\": [{\"path\", \"chunks\", \"bytes\", \"mtime\"}], \"count\"}\n");
            return 0;
        } else if ((v = opt_db(argc, argv, &i))) db = v;
        else if (strcmp(argv[i], "--json") == 0) json = true;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "modattn ls: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        } else if (!prefix) prefix = argv[i];
        else {
            fprintf(stderr, "modattn ls: one FOLDER at most\n");
            return 2;
        }
    }
    char real[PATH_MAX];
    if (prefix) {
        stored_form(prefix, real, sizeof real);
        prefix = real;
    }
    modattn_store *s = NULL;
    int st = modattn_store_open(db, MODATTN_STORE_READONLY, &s);
    if (st) return cli_fail("ls: opening the store", st);
    doc_list l = {NULL, 0, 0, prefix, 0};
    st = modattn__store_each_path(s, collect, &l);
    if (!st) st = l.st;
    if (st) {
        list_free(&l);
        modattn_store_close(s);
        return cli_fail("ls", st);
    }
    json_t *arr = json ? json_array() : NULL;
    for (size_t i = 0; i < l.n && !st; i++) {
        modattn_store_doc d;
        memset(&d, 0, sizeof d);
        int k = modattn__store_find_document(s, l.v[i], &d);
        if (k < 0) {
            st = k;
            break;
        }
        char when[40] = "-";
        if (d.mtime_ns > 0) {
            time_t t = (time_t)(d.mtime_ns / 1000000000);
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        }
        if (json) {
            json_t *o = json_pack("{s:I, s:I, s:s}", "chunks", (json_int_t)d.nchunks, "bytes", (json_int_t)d.size,
                                  "mtime", when);
            if (o) cli_json_set_path(o, "path", l.v[i]);
            json_array_append_new(arr, o);
        } else {
            char pb[PATH_MAX * 2], rb[PATH_MAX];
            printf("%6lld chunks %10lld bytes  %s  %s\n", (long long)d.nchunks, (long long)d.size, when,
                   cli_term_text(cli_rel_path(l.v[i], rb, sizeof rb), pb, sizeof pb));
        }
    }
    modattn_store_close(s);
    int rc = 0;
    if (st) rc = cli_fail("ls", st);
    else if (json) rc = cli_print_json(json_pack("{s:o, s:I}", "documents", arr, "count", (json_int_t)l.n));
    else if (!l.n) fprintf(stderr, "modattn ls: no documents%s\n", prefix ? " under that folder" : "");
    if (st && arr) json_decref(arr);
    list_free(&l);
    return cli_finish_stdout(rc);
}

int cli_cmd_rm(cli_globals *g, int argc, char **argv) {
    const char *db = MODATTN_STORE_DEFAULT_PATH;
    bool quiet = false;
    const char **paths = calloc((size_t)argc + 1, sizeof *paths);
    size_t np = 0;
    if (!paths) return 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_is_help(argv[i])) {
            printf("usage: modattn rm [--db FILE] [--quiet] PATH...\n\n"
                   "Removes documents from a store: a file's document, every document under a folder, an\n"
                   "archive's members, or one member (ARCHIVE!/MEMBER) (the files themselves are not\n"
                   "touched; a removed file or member comes back with the next `index` of it), then brings the vector file and the ANN index\n"
                   "up to date, as `index --prune` does. A PATH the store holds nothing of is an error\n"
                   "(exit 1) after the others are removed.\n"
                   "  --db FILE   the store (default ./" MODATTN_STORE_DEFAULT_PATH ")\n"
                   "  --quiet     say nothing but errors\n");
            free(paths);
            return 0;
        } else if ((v = opt_db(argc, argv, &i))) db = v;
        else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) quiet = true;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "modattn rm: unknown option '%s' (see --help)\n", argv[i]);
            free(paths);
            return 2;
        } else paths[np++] = argv[i];
    }
    if (!np) {
        fprintf(stderr, "modattn rm: no PATH given (see --help)\n");
        free(paths);
        return 2;
    }
    modattn_store *s = NULL;
    int st = modattn_store_open(db, 0, &s);
    if (st) {
        free(paths);
        return cli_fail("rm: opening the store", st);
    }
    int rc = 0;
    size_t removed = 0;
    for (size_t i = 0; i < np && !st; i++) {
        /* stored paths are absolute and real: the PATH as the file system names it now, or (a file
         * already gone) made absolute from the current folder */
        char abs[PATH_MAX];
        stored_form(paths[i], abs, sizeof abs);
        doc_list l = {NULL, 0, 0, abs, 0};
        st = modattn__store_each_path(s, collect, &l);
        if (!st) st = l.st;
        size_t here = 0;
        for (size_t k = 0; k < l.n && !st; k++) {
            int d = modattn_store_delete_document(s, l.v[k]);
            if (d < 0) st = d;
            else if (d == 1) {
                here++;
                if (!quiet) {
                    char pb[PATH_MAX * 2], rb[PATH_MAX];
                    printf("removed %s\n", cli_term_text(cli_rel_path(l.v[k], rb, sizeof rb), pb, sizeof pb));
                }
            }
        }
        list_free(&l);
        removed += here;
        /* what the store remembers of files there (an archive read whole, a file skipped for its
         * format) goes too; a member removed: its archive is read again by the next index */
        int64_t notes = 0;
        if (!st && (notes = modattn__note_delete(s, abs, 1)) < 0) st = (int)notes;
        char *bang = strstr(abs, "!/");
        if (!st && bang) {
            *bang = '\0';
            int64_t k = modattn__note_delete(s, abs, 0);
            if (k < 0) st = (int)k;
            *bang = '!';
        }
        if (!st && !here && !notes) {
            char pb[PATH_MAX * 2];
            fprintf(stderr, "modattn rm: %s: the store holds no document there\n", cli_term_text(paths[i], pb, sizeof pb));
            rc = 1;
        }
    }
    if (st) {
        modattn_store_close(s);
        free(paths);
        return cli_fail("rm", st);
    }
    if (removed) { /* the vector file and the ANN index, as after index --prune */
        modattn_vecfile_update u;
        if (modattn_store_update_vector_file(s, &u) != 0)
            fprintf(stderr, "modattn rm: note: the vector file was not updated (searches read the store): %s\n",
                    modattn_last_error());
        else {
            modattn_ctx *ctx = NULL;
            modattn_ann_update au;
            if (cli_open_ctx(g, &ctx) == 0 &&
                modattn_store_update_ann(s, MODATTN_ANN_NONE, NULL, false, modattn_ctx_exec(ctx), NULL, NULL, &au) != 0)
                fprintf(stderr, "modattn rm: note: the ANN index was not updated: %s\n", modattn_last_error());
        }
    }
    if (!quiet) fprintf(stderr, "modattn rm: %zu document%s removed from %s\n", removed, removed == 1 ? "" : "s", db);
    modattn_store_close(s);
    free(paths);
    return cli_finish_stdout(rc);
}
