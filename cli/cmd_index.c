/* cli/cmd_index.c — `modattn index`: files and folders into a document store, as parse
 * (cli/cli_index_args.c) -> run (here) -> print (cli/cli_index_out.c). Front end only: the work is
 * modattn_index_paths (pipeline/indexer.c). The run's steps are shared with `index --mpi`
 * (cli/cmd_mpi.c), whose rank 0 runs them around its distributed indexing. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/sparse.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"

int cli_index_load(cli_globals *g, const cli_index_args *a, cli_index_job *j, const char **what) {
    *what = NULL;
    if (cli_open_ctx(g, &j->ctx)) return MODATTN_EINVAL; /* said */
    j->model_dir = cli_model_dir_for_store(a->model_dir, NULL, a->db, j->mbuf, sizeof j->mbuf);
    *what = "loading the model";
    return cli_load_model(g, j->ctx, j->model_dir, &j->model);
}

int cli_index_open_store(const cli_index_args *a, cli_index_job *j) {
    int st = modattn_store_open(a->db, MODATTN_STORE_CREATE, &j->store);
    if (st) return st;
    if (modattn_store_note(j->store)) { /* said even with --quiet: the store lacks something */
        char nb[1024];
        fprintf(stderr, "modattn: note: %s\n", cli_term_text(modattn_store_note(j->store), nb, sizeof nb));
    }
    modattn_store_set_wait(j->store, a->wait_s, a->quiet ? NULL : cli_index_note_wait, NULL);
    j->ui.json = a->json;
    j->ui.quiet = a->quiet;
    j->ui.verbose = a->verbose;
    j->ui.said = json_object();
    j->ui.tty = isatty(STDERR_FILENO) == 1;
    j->ui.errors = json_array();
    j->ui.skipped = json_array();
    cli_index_options(a, &j->o);
    j->o.on_event = cli_index_on_event;
    j->o.on_progress = cli_index_on_progress;
    j->o.ud = &j->ui;
    j->o.ann_exec = modattn_ctx_exec(j->ctx);
    return 0;
}

/* The PATHs given, as absolute paths, for `index` with no PATH to refresh. */
static void record_roots(const cli_index_args *a, cli_index_job *j) {
    char **abs = calloc(a->npaths, sizeof *abs);
    size_t na = 0;
    for (size_t i = 0; abs && i < a->npaths; i++)
        if ((abs[na] = realpath(a->paths[i], NULL))) na++;
    if (abs && modattn__store_add_roots(j->store, (const char *const *)abs, na) != 0) {
        char nb[600];
        fprintf(stderr, "modattn: note: the indexed folders were not recorded: %s\n",
                cli_term_text(modattn_last_error(), nb, sizeof nb));
    }
    for (size_t i = 0; i < na; i++) free(abs[i]);
    free(abs);
}

/* The ANN index after the vector file: asked for, or the one there kept up to date. Asked for and
 * failed: the run fails (nothing stored is lost; searches scan exactly); not asked: a warning, as
 * for the vector file. */
static void update_ann(const cli_index_args *a, cli_index_job *j) {
    if (a->ann_kind) {
        /* asked for: built (or kept) now, the run's own update (if any) being current already */
        int ast = modattn_store_update_ann(j->store, a->kind, a->ann_params ? &a->annp : NULL,
                                           a->kind == MODATTN_ANN_NONE, modattn_ctx_exec(j->ctx),
                                           cli_index_on_ann_progress, &j->ui, &j->au);
        if (j->ui.tty && !a->quiet) fprintf(stderr, "\r\033[K");
        if (ast) {
            j->rc = cli_fail("building the ANN index", ast);
            j->st = ast;
        } else if (j->au.action == MODATTN_ANN_ACTION_CURRENT && j->s.ann.action == MODATTN_ANN_ACTION_ADDED) {
            j->au = j->s.ann; /* the run added the rows: say that */
        }
        return;
    }
    j->au = j->s.ann; /* the run kept the one there up to date (modattn_index_paths) */
    if (j->s.ann_error[0]) {
        snprintf(j->ann_err, sizeof j->ann_err, "%s", j->s.ann_error);
        char tb[2048];
        fprintf(stderr, "modattn: index: warning: the ANN index was not updated (searches scan exactly): %s\n",
                cli_term_text(j->ann_err, tb, sizeof tb));
    }
}

void cli_index_finish(const cli_index_args *a, cli_index_job *j) {
    if (!j->st && a->npaths && !a->refresh) record_roots(a, j); /* for `index` with no PATH */
    if (!j->st) { /* the store remembers its model: search and serve --db need no --model */
        char real[PATH_MAX];
        if (realpath(j->model_dir, real) && modattn__store_set_model_dir(j->store, real) != 0) {
            char nb[600];
            fprintf(stderr, "modattn: note: the store's model folder was not recorded: %s\n",
                    cli_term_text(modattn_last_error(), nb, sizeof nb));
        }
    }
    cli_index_clear_line(&j->ui);
    if (!j->st) update_ann(a, j);
}

void cli_index_job_free(cli_index_job *j) {
    json_decref(j->ui.errors);
    json_decref(j->ui.said);
    json_decref(j->ui.skipped);
    modattn_store_close(j->store);
    modattn_sparse_free(j->sparse);
    modattn_model_free(j->model);
    memset(j, 0, sizeof *j);
}

/* The plain run: load, open, index the PATHs, finish. 0, or the exit status of what stopped it
 * before the documents (said). */
static int index_run(cli_globals *g, const cli_index_args *a, cli_index_job *j) {
    const char *what;
    int st = cli_index_load(g, a, j, &what);
    if (st) return what ? cli_fail(what, st) : 1;
    if (cli_prompt_check("index", j->model, &a->eo, true)) return 2;
    if ((st = cli_index_open_store(a, j))) return cli_fail("opening the store", st);
    /* sparse vectors: --sparse, or the model the store records (every chunk has one, or none) */
    const char *sdir = a->sparse_dir;
    modattn__sparse_ident sid;
    bool have_sparse = false;
    if (!sdir && (st = modattn__store_sparse_get(j->store, &sid, &have_sparse))) return cli_fail("reading the store", st);
    if (!sdir && have_sparse && sid.dir[0]) sdir = sid.dir;
    if (sdir) {
        if ((st = cli_load_sparse(g, j->ctx, sdir, &j->sparse))) return cli_fail("loading the sparse model", st);
        j->o.sparse = j->sparse;
    }
    if (!a->quiet && !a->json && a->npaths) {
        modattn_embed_options eo = a->eo;
        eo.task = MODATTN_EMBED_DOCUMENT;
        cli_prompt_say("index", j->model, &eo, "chunks get");
    }
    uint64_t t0 = modattn__now_ns();
    j->st = a->npaths ? modattn_index_paths(j->store, j->model, a->paths, a->npaths, &j->o, &j->s) : 0;
    j->secs = (double)(modattn__now_ns() - t0) * 1e-9;
    cli_index_finish(a, j);
    return 0;
}

int cli_cmd_index(cli_globals *g, int argc, char **argv) {
    cli_index_args a;
    int rc = cli_index_parse(argc, argv, true, &a);
    if (!rc) rc = cli_index_roots(&a, true);
    if (rc) {
        cli_index_args_free(&a);
        if (rc == -1) cli_index_usage(stdout);
        return rc < 0 ? 0 : rc;
    }
    cli_index_job j;
    memset(&j, 0, sizeof j);
    rc = index_run(g, &a, &j);
    if (!rc) rc = cli_index_print(&a, &j, 0);
    if (a.watch && (rc == 0 || rc == 3) && !j.st) {
        fflush(stdout);
        rc = cli_index_watch(&a, &j);
    }
    cli_index_job_free(&j);
    cli_index_args_free(&a);
    return rc;
}
