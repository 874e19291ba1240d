/* cli/cmd_index.c — `modattn index`: files and folders into a document store.
 * Front end only: options, the progress line, messages and the summary; the work is
 * modattn_index_paths (pipeline/indexer.c). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/store.h"

static void index_usage(FILE *f) {
    fprintf(f,
            "usage: modattn index [--db FILE] [--model DIR] [--json] [--quiet] [--prune]\n"
            "                     [--chunk-tokens N] [--overlap N] [--max-file-size SIZE]\n"
            "                     [--batch N] [--wait SECONDS] [--ann KIND [--ann-params P]]\n"
            "                     [--file-timeout SECONDS]\n"
            "                     [PATH...]\n\n"
            "Index files and folders (recursively) into a document store for `modattn search`.\n"
            "With no PATH, the folders and files the store was indexed from are indexed again\n"
            "(new, changed and, with --prune, removed files).\n"
            "Reads .txt, .md, .html/.htm (visible text), .pdf, and other files that look like\n"
            "text; skips binary, empty and special files (FIFOs, sockets, devices) and files\n"
            "over the size cap, and does not walk into hidden folders. Each document is cut\n"
            "into overlapping chunks of word pieces, embedded, and written in one transaction:\n"
            "an interrupted run loses at most the document it was writing, and the next run\n"
            "skips what is already there. Unchanged files (same size and mtime, or same\n"
            "content hash) are not embedded again; changed ones are re-embedded. Invalid UTF-8\n"
            "is replaced by U+FFFD for embedding and storing; a chunk's byte range points into\n"
            "the file (for HTML and PDF, into the extracted text). Files over the size cap are\n"
            "skipped with a message without being read.\n\n"
            "options:\n"
            "  --db FILE            the store (default ./" MODATTN_STORE_DEFAULT_PATH "; created if missing)\n"
            "  --model DIR|NAME     the model: a folder or a name (`modattn models`) (default:\n"
            "                       $MODATTN_MODEL, else the model the store was indexed with,\n"
            "                       else all-MiniLM-L6-v2 where `modattn models` looks); a store\n"
            "                       keeps its model\n"
            "  --prune              also remove stored documents whose file no longer exists\n"
            "  --chunk-tokens N     tokens per chunk, [CLS]/[SEP] included (default: the\n"
            "                       model's max_seq_length, 256 for all-MiniLM-L6-v2)\n"
            "  --overlap N          word pieces shared by consecutive chunks (default 32)\n"
            "  --max-file-size SIZE skip larger files (default 64M; K, M, G suffixes); the text\n"
            "                       extracted from an HTML or PDF file is capped the same\n"
            "  --file-timeout SECONDS  stop extracting the text of an HTML or PDF file after\n"
            "                       this long and skip the file with an error (default 30;\n"
            "                       0: no limit). Extraction runs in a child process whose\n"
            "                       memory is capped by what --mem-budget leaves (1 GiB\n"
            "                       without a budget): a file past it is skipped the same\n"
            "  --batch N            chunks per model call, across documents (default 64)\n"
            "  --ann KIND           build an approximate-search index beside the store (DB.ann)\n"
            "                       for `search` to use: through FAISS, hnsw (graph, best recall\n"
            "                       per query time), ivf-sq8 (8-bit vectors), ivf-pq (product-\n"
            "                       quantised codes); or a compact copy of every vector, scanned\n"
            "                       whole, its best candidates scored again exactly: f16 (half\n"
            "                       the bytes), int8 (a quarter), binary (sign bits, 1/32);\n"
            "                       `none` removes it. Without --ann\n"
            "                       an index already there is kept up to date (rows added; built\n"
            "                       again after a compaction). With --ann, PATH may be left out\n"
            "                       to build it for what the store holds\n"
            "  --ann-params P       FAISS's parameters, e.g. M=32,efConstruction=40,efSearch=64\n"
            "                       (hnsw) or nlist=1024,nprobe=16,m=48,nbits=8 (ivf), and\n"
            "                       rescore=N (candidates scored again exactly); 0 or absent:\n"
            "                       defaults for the store's size (README: Large corpora)\n"
            "  --mpi                under mpirun -np N: embed on N processes, one store (README: MPI)\n"
            "  --wait SECONDS       how long to wait for another writer of the store (another\n"
            "                       `modattn index`) to let go of its lock, saying so after half\n"
            "                       a second (default 60; 0: fail at once). A writer holds it\n"
            "                       only while writing one document, never while embedding\n"
            "  --json               print the summary as JSON:\n"
            "                       {\"files_seen\", \"files_indexed\", \"files_unchanged\",\n"
            "                        \"files_skipped\", \"files_pruned\", \"chunks_embedded\",\n"
            "                        \"tokens_embedded\", \"seconds\", \"db\", \"errors\": [{\"path\",\n"
            "                        \"message\"}], \"skipped\": [{\"path\", \"reason\"}],\n"
            "                        \"vector_file\": \"written\" | \"appended\" | \"current\" | \"not written: ...\",\n"
            "                        \"vector_file_rows_added\", \"vector_file_rows_masked\" (appended),\n"
            "                        \"vector_file_reason\" (why written whole), \"ann\": {\"action\":\n"
            "                        \"built\" | \"added\" | \"current\" | \"removed\", \"kind\", \"params\",\n"
            "                        \"rows\", \"rows_added\", \"bytes\", \"seconds\", \"reason\"} (when\n"
            "                        there is one), \"ann_error\" (when updating it failed)}\n"
            "  --quiet              no progress line and no notes on skipped files\n"
            "  -h, --help           this help\n\n"
            "exit status: 0 done; 3 done, but some files could not be read or their text not\n"
            "extracted (damaged, over --file-timeout or the memory budget: listed); 1 the run\n"
            "stopped (store, model, memory); 2 usage error.\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n");
}

static void note_wait(void *ud, const char *msg) {
    (void)ud;
    char safe[700];
    fprintf(stderr, "modattn: note: %s\n", cli_term_text(msg, safe, sizeof safe));
}

static void fmt_duration(double s, char *buf, size_t len) {
    if (!(s >= 0) || s > 359999) {
        snprintf(buf, len, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

static void on_progress(void *ud, const modattn_index_progress *p) {
    cli_index_ui *ui = ud;
    if (!ui->tty || ui->quiet) return;
    double rate = p->elapsed_s > 0 ? (double)p->tokens / p->elapsed_s : 0;
    char eta[32] = "--:--";
    if (p->bytes_done > 0 && p->bytes_total >= p->bytes_done && p->elapsed_s > 0.5)
        fmt_duration(p->elapsed_s * (double)(p->bytes_total - p->bytes_done) / (double)p->bytes_done,
                     eta, sizeof eta);
    fprintf(stderr, "\r\033[Kindexing: %llu/%llu files  %llu chunks  %.0f tok/s  ETA %s",
            (unsigned long long)p->files_done, (unsigned long long)p->files_total,
            (unsigned long long)p->chunks, rate, eta);
    fflush(stderr);
    ui->line_shown = true;
}


static bool parse_count(const char *v, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*v == '\0' || *end || errno || x < lo || x > hi) return false;
    *out = x;
    return true;
}

static void on_ann_progress(void *ud, const char *phase, size_t done, size_t total) {
    const cli_index_ui *ui = ud;
    if (ui->quiet || !ui->tty) return;
    if (strcmp(phase, "add") == 0)
        fprintf(stderr, "\r\033[KANN index: %s rows %zu/%zu (%.0f%%)", done < total ? "adding" : "added", done, total,
                total ? 100.0 * (double)done / (double)total : 100.0);
    else if (done == 0)
        fprintf(stderr, "\r\033[KANN index: %s", strcmp(phase, "train") == 0 ? "training" : "writing");
}

/* The ANN index's update as JSON (what `index --json` prints under "ann"). */
static json_t *ann_json(const modattn_ann_update *u) {
    static const char *const actions[] = {"none", "current", "added", "built", "removed"};
    char params[200];
    modattn_ann_params_format(u->kind, &u->params, params, sizeof params);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:f}", "action", actions[u->action], "kind",
                          modattn_ann_kind_name(u->kind), "params", params, "rows", (json_int_t)u->rows, "rows_added",
                          (json_int_t)u->rows_added, "bytes", (json_int_t)u->file_bytes, "seconds", u->seconds);
    if (j && u->reason[0]) json_object_set_new(j, "reason", cli_json_text(u->reason));
    return j;
}

int cli_cmd_index(cli_globals *g, int argc, char **argv) {
    if (cli_has_arg(argc, argv, "--mpi")) return cli_cmd_index_mpi(g, argc, argv);
    const char *db = MODATTN_STORE_DEFAULT_PATH, *model_dir = NULL;
    bool json = false, quiet = false, prune = false, dashdash = false;
    double wait_s = MODATTN_STORE_DEFAULT_WAIT_S;
    double file_timeout = MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S;
    long long chunk_tokens = 0, overlap = -1, batch = 0;
    int64_t max_size = 0;
    const char *ann_kind = NULL, *ann_params = NULL;
    modattn_ann_kind kind = MODATTN_ANN_NONE;
    modattn_ann_params annp;
    memset(&annp, 0, sizeof annp);
    const char **paths = calloc((size_t)argc + 1, sizeof *paths);
    size_t npaths = 0;
    if (!paths) {
        fprintf(stderr, "modattn: index: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (dashdash || a[0] != '-' || a[1] == '\0') {
            paths[npaths++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) dashdash = true;
        else if (cli_is_help(a)) {
            index_usage(stdout);
            free(paths);
            return 0;
        } else if (strcmp(a, "--json") == 0) json = true;
        else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) quiet = true;
        else if (strcmp(a, "--prune") == 0) prune = true;
        else if ((v = cli_opt_value(argc, argv, &i, "--db", &missing))) db = v;
        else if ((v = cli_opt_value(argc, argv, &i, "--model", &missing))) model_dir = v;
        else if ((v = cli_opt_value(argc, argv, &i, "--chunk-tokens", &missing))) {
            if (!parse_count(v, 3, 1 << 20, &chunk_tokens)) {
                fprintf(stderr, "modattn: index: --chunk-tokens: '%s' is not a token count\n", v);
                rc = 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--overlap", &missing))) {
            if (!parse_count(v, 0, 1 << 20, &overlap)) {
                fprintf(stderr, "modattn: index: --overlap: '%s' is not a count of word pieces\n", v);
                rc = 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--batch", &missing))) {
            if (!parse_count(v, 1, 65536, &batch)) {
                fprintf(stderr, "modattn: index: --batch: '%s' is not a count in [1, 65536]\n", v);
                rc = 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--wait", &missing))) {
            if (cli_parse_double("index --wait", v, 0, 1e6, false, &wait_s) != 0) rc = 2;
        } else if ((v = cli_opt_value(argc, argv, &i, "--file-timeout", &missing))) {
            if (cli_parse_double("index --file-timeout", v, 0, 1e6, false, &file_timeout) != 0) rc = 2;
        } else if ((v = cli_opt_value(argc, argv, &i, "--ann", &missing))) {
            ann_kind = v;
            if (modattn_ann_kind_parse(v, &kind) != 0) {
                fprintf(stderr, "modattn: index: --ann: %s\n", modattn_last_error());
                rc = 2;
            } else if (modattn_ann_kind_available(kind) != 0) {
                fprintf(stderr, "modattn: index: --ann %s: %s\n", v, modattn_last_error());
                rc = 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--ann-params", &missing))) {
            ann_params = v;
            if (modattn_ann_params_parse(v, &annp) != 0) {
                fprintf(stderr, "modattn: index: --ann-params: %s\n", modattn_last_error());
                rc = 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--max-file-size", &missing))) {
            if (modattn_parse_bytes(v, &max_size) != 0 || max_size <= 0) {
                fprintf(stderr, "modattn: index: --max-file-size: '%s' is not a size\n", v);
                rc = 2;
            }
        } else if (missing) {
            fprintf(stderr, "modattn: index: %s needs a value\n", a);
            rc = 2;
        } else {
            fprintf(stderr, "modattn: index: unknown option '%s' (see modattn index --help)\n", a);
            rc = 2;
        }
        if (rc) {
            free(paths);
            return rc;
        }
    }
    if (ann_params && !ann_kind) {
        fprintf(stderr, "modattn: index: --ann-params needs --ann KIND\n");
        free(paths);
        return 2;
    }
    /* no PATH: the folders and files the store was indexed from, refreshed */
    char **roots = NULL;
    size_t nroots = 0;
    const bool refresh = npaths == 0 && !ann_kind;
    if (refresh) {
        modattn_store *peek = NULL;
        if (access(db, F_OK) == 0 && modattn_store_open(db, MODATTN_STORE_READONLY, &peek) == 0)
            (void)modattn_store_get_roots(peek, &roots, &nroots);
        modattn_store_close(peek);
        if (nroots == 0) {
            fprintf(stderr, "modattn: index: no PATH given (and %s records none to refresh)\n\n", db);
            index_usage(stderr);
            free(paths);
            return 2;
        }
        const char **np = realloc(paths, (nroots + 1) * sizeof *np);
        if (!np) {
            fprintf(stderr, "modattn: index: out of memory\n");
            for (size_t i = 0; i < nroots; i++) modattn_free(roots[i]);
            modattn_free(roots);
            free(paths);
            return 1;
        }
        paths = np;
        for (size_t i = 0; i < nroots; i++) paths[npaths++] = roots[i];
        if (!quiet && !json)
            fprintf(stderr, "modattn: index: refreshing the %zu folder%s and file%s %s was indexed from\n", nroots,
                    nroots == 1 ? "" : "s", nroots == 1 ? "" : "s", db);
    }

#define FREE_ROOTS()                                                     \
    do {                                                                 \
        for (size_t r_ = 0; r_ < nroots; r_++) modattn_free(roots[r_]); \
        modattn_free(roots);                                             \
    } while (0)
    modattn_ctx *ctx = NULL;
    if (cli_open_ctx(g, &ctx)) {
        FREE_ROOTS();
        free(paths);
        return 1;
    }
    char mbuf[PATH_MAX + 64];
    model_dir = cli_model_dir_for_store(model_dir, NULL, db, mbuf, sizeof mbuf);
    modattn_model *model = NULL;
    modattn_store *store = NULL;
    int st = cli_load_model(g, ctx, model_dir, &model);
    if (st) {
        FREE_ROOTS();
        free(paths);
        return cli_fail("loading the model", st);
    }
    if ((st = modattn_store_open(db, MODATTN_STORE_CREATE, &store))) {
        modattn_model_free(model);
        FREE_ROOTS();
        free(paths);
        return cli_fail("opening the store", st);
    }

    if (modattn_store_note(store)) { /* said even with --quiet: the store lacks something */
        char nb[1024];
        fprintf(stderr, "modattn: note: %s\n", cli_term_text(modattn_store_note(store), nb, sizeof nb));
    }
    if (!quiet) modattn_store_set_wait(store, wait_s, note_wait, NULL);
    else modattn_store_set_wait(store, wait_s, NULL, NULL);
    cli_index_ui ui;
    memset(&ui, 0, sizeof ui);
    ui.json = json;
    ui.quiet = quiet;
    ui.tty = isatty(STDERR_FILENO) == 1;
    ui.errors = json_array();
    ui.skipped = json_array();
    modattn_index_options o;
    memset(&o, 0, sizeof o);
    o.chunk_tokens = (size_t)chunk_tokens;
    o.overlap = (long)overlap;
    o.max_file_bytes = (uint64_t)max_size;
    o.batch_chunks = (size_t)batch;
    o.file_timeout_s = file_timeout > 0 ? file_timeout : -1; /* 0 on the command line: no limit */
    o.prune = prune;
    o.on_event = cli_index_on_event;
    o.on_progress = on_progress;
    o.ud = &ui;
    o.ann_exec = modattn_ctx_exec(ctx);
    modattn_index_stats s;
    memset(&s, 0, sizeof s);
    uint64_t t0 = modattn_now_ns();
    st = npaths ? modattn_index_paths(store, model, paths, npaths, &o, &s) : 0;
    double secs = (double)(modattn_now_ns() - t0) * 1e-9;
    if (!st && npaths && !refresh) { /* the roots, for `index` with no PATH */
        char **abs = calloc(npaths, sizeof *abs);
        size_t na = 0;
        for (size_t i = 0; abs && i < npaths; i++)
            if ((abs[na] = realpath(paths[i], NULL))) na++;
        if (abs && modattn_store_add_roots(store, (const char *const *)abs, na) != 0) {
            char nb[600];
            fprintf(stderr, "modattn: note: the indexed folders were not recorded: %s\n",
                    cli_term_text(modattn_last_error(), nb, sizeof nb));
        }
        for (size_t i = 0; i < na; i++) free(abs[i]);
        free(abs);
    }
    if (!st) { /* the store remembers its model: search and serve --db need no --model */
        char real[PATH_MAX];
        if (realpath(model_dir, real) && modattn_store_set_model_dir(store, real) != 0) {
            char nb[600];
            fprintf(stderr, "modattn: note: the store's model folder was not recorded: %s\n",
                    cli_term_text(modattn_last_error(), nb, sizeof nb));
        }
    }
    cli_index_clear_line(&ui);
    /* the ANN index after the vector file: asked for, or the one there kept up to date. Asked for
     * and failed: the run fails (nothing stored is lost; searches scan exactly); not asked: a
     * warning, as for the vector file */
    modattn_ann_update au;
    memset(&au, 0, sizeof au);
    char ann_err[1024] = "";
    if (!st && ann_kind) {
        /* asked for: built (or kept) now, the run's own update (if any) being current already */
        int ast = modattn_store_update_ann(store, kind, ann_params ? &annp : NULL, kind == MODATTN_ANN_NONE,
                                           modattn_ctx_exec(ctx), on_ann_progress, &ui, &au);
        if (ui.tty && !quiet) fprintf(stderr, "\r\033[K");
        if (ast) {
            rc = cli_fail("building the ANN index", ast);
            st = ast;
        } else if (au.action == MODATTN_ANN_ACTION_CURRENT && s.ann.action == MODATTN_ANN_ACTION_ADDED) {
            au = s.ann; /* the run added the rows: say that */
        }
    } else if (!st) {
        /* the run kept the one there up to date (modattn_index_paths) */
        au = s.ann;
        if (s.ann_error[0]) {
            snprintf(ann_err, sizeof ann_err, "%s", s.ann_error);
            char tb[2048];
            fprintf(stderr, "modattn: index: warning: the ANN index was not updated (searches scan exactly): %s\n",
                    cli_term_text(ann_err, tb, sizeof tb));
        }
    }
    if (st) {
        if (!rc) rc = cli_fail("index", st);
    } else if (!ui.errors || !ui.skipped || ui.oom) {
        fprintf(stderr, "modattn: index: out of memory\n");
        rc = 1;
    } else {
        char dbuf[PATH_MAX];
        char *abs_db = modattn_path_absolute(db);
        const char *db_rel = abs_db ? cli_rel_path(abs_db, dbuf, sizeof dbuf) : db;
        char db_shown[4 * PATH_MAX], tvf[4096];
        /* DB.vec, what `search` maps: a failure to write it costs searches speed, not results */
        char vf[400];
        if (s.vector_file_error[0]) {
            snprintf(vf, sizeof vf, "not written: %s", s.vector_file_error);
            fprintf(stderr, "modattn: index: warning: the vector file was not written (searches will read the store, "
                            "slower): %s\n", cli_term_text(s.vector_file_error, tvf, sizeof tvf));
        } else snprintf(vf, sizeof vf, "%s", !s.vector_file_written ? "current"
                                             : s.vector_file_appended ? "appended" : "written");
        if (json) {
            json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:O, s:O}",
                                  "files_seen", (json_int_t)s.files_seen,
                                  "files_indexed", (json_int_t)s.files_indexed,
                                  "files_unchanged", (json_int_t)s.files_unchanged,
                                  "files_skipped", (json_int_t)s.files_skipped,
                                  "files_pruned", (json_int_t)s.files_pruned,
                                  "chunks_embedded", (json_int_t)s.chunks_embedded,
                                  "tokens_embedded", (json_int_t)s.tokens_embedded,
                                  "seconds", secs, "db", "",
                                  "errors", ui.errors, "skipped", ui.skipped);
            if (j && cli_json_set_path(j, "db", db_rel)) json_decref(j), j = NULL;
            if (j) json_object_set_new(j, "vector_file", cli_json_text(vf));
            if (j && s.vector_file_appended) {
                json_object_set_new(j, "vector_file_rows_added", json_integer((json_int_t)s.vector_file_rows_added));
                json_object_set_new(j, "vector_file_rows_masked", json_integer((json_int_t)s.vector_file_rows_masked));
            }
            if (j && s.vector_file_written && !s.vector_file_appended && s.vector_file_reason[0])
                json_object_set_new(j, "vector_file_reason", cli_json_text(s.vector_file_reason));
            if (j && au.action != MODATTN_ANN_ACTION_NONE) json_object_set_new(j, "ann", ann_json(&au));
            if (j && ann_err[0]) json_object_set_new(j, "ann_error", cli_json_text(ann_err));
            char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) : NULL;
            if (modattn_json_take_failure() != 0 || !text) { /* incl. one while building ui.errors */
                modattn_json_free(text);
                text = NULL;
                rc = cli_json_fail("index: writing JSON");
            } else {
                puts(text);
                modattn_json_free(text);
            }
            json_decref(j);
        } else {
            cli_term_text(db_rel, db_shown, sizeof db_shown);
            if (npaths) printf("%s: %llu files seen: %llu indexed (%llu chunks, %llu tokens, %.0f tokens/s), "
                   "%llu unchanged, %llu skipped",
                   db_shown, (unsigned long long)s.files_seen,
                   (unsigned long long)s.files_indexed, (unsigned long long)s.chunks_embedded,
                   (unsigned long long)s.tokens_embedded,
                   secs > 0 ? (double)s.tokens_embedded / secs : 0.0,
                   (unsigned long long)s.files_unchanged, (unsigned long long)s.files_skipped);
            if (npaths) {
                if (s.errors) printf(" (%llu unreadable)", (unsigned long long)s.errors);
                if (prune) printf(", %llu pruned", (unsigned long long)s.files_pruned);
                printf(" in %.1f s\n", secs);
            }
            if (au.action != MODATTN_ANN_ACTION_NONE) {
                char pf[200], params[210], rb[1024];
                modattn_ann_params_format(au.kind, &au.params, pf, sizeof pf);
                snprintf(params, sizeof params, "%s%s%s", pf[0] ? " (" : "", pf, pf[0] ? ")" : "");
                if (au.action == MODATTN_ANN_ACTION_REMOVED) printf("ANN index removed\n");
                else if (au.action == MODATTN_ANN_ACTION_CURRENT)
                    printf("ANN index %s%s: current, %zu rows\n", modattn_ann_kind_name(au.kind), params, au.rows);
                else
                    printf("ANN index %s%s: %s %zu rows in %.1f s, %.1f MB%s%s%s\n", modattn_ann_kind_name(au.kind),
                           params, au.action == MODATTN_ANN_ACTION_ADDED ? "added" : "built over", au.rows_added,
                           au.seconds, (double)au.file_bytes / 1e6, au.reason[0] ? " (" : "",
                           au.reason[0] ? cli_term_text(au.reason, rb, sizeof rb) : "", au.reason[0] ? ")" : "");
            }
        }
        modattn_free(abs_db);
        if (cli_stdout_check()) rc = 1;
        else if (s.errors) rc = 3;
    }
    json_decref(ui.errors);
    json_decref(ui.skipped);
    modattn_store_close(store);
    modattn_model_free(model);
    FREE_ROOTS();
#undef FREE_ROOTS
    free(paths);
    return rc;
}
