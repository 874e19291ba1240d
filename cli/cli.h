/* cli/cli.h — what the `modattn` subcommands share: global options and small helpers.
 * Front end only: parse arguments, call the library, print. No model logic here. */
#ifndef MODATTN_CLI_H
#define MODATTN_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "modattn/modattn.h"
#include "modattn/model.h"

/* Options every subcommand accepts, before or after its name. */
typedef struct cli_globals {
    const char *attn;      /* --attn POLICY (NULL: auto) */
    int threads;           /* --threads N (0: all CPUs) */
    const char *trace;     /* --trace FILE */
    bool stats;            /* --stats */
    bool json_stats;       /* --stats with the command's --json: stats as one JSON line */
    int64_t mem_budget;    /* --mem-budget BYTES (0: none) */
    const char *device;    /* --device D or $MODATTN_DEVICE (NULL: the CPU), checked by main */
    bool host_fallback;    /* --host-fallback or $MODATTN_HOST_FALLBACK=1 */
    const char *precision_text;  /* --precision P or $MODATTN_PRECISION, parsed by main into: */
    modattn_precision precision;
    bool few_inputs;       /* set by a command that embeds only a query (search) */
    const char *prog;      /* argv[0] */
    modattn_ctx *ctx;      /* opened by cli_open_ctx; main prints --stats from it and frees it */
    modattn_pool *pool;    /* the one thread pool, shared by ctx and the model; main frees it */
} cli_globals;

/* A subcommand: argv[0] is its name; global options are already removed.
 * Returns the process exit status (0 ok, 1 failure, 2 usage error). */
typedef int (*cli_cmd_fn)(cli_globals *g, int argc, char **argv);

/* Where the shared helpers live, so that no two cli/ files call each other (the layers test,
 * tools/check_layers.py --strict-file-cycles, checks it from the objects): cli_text.c (output,
 * messages) at the bottom; cli_args.c (option values) and cli_model.c (the context, the model) on
 * it; the per-command readers and printers (cli_index*.c, cli_search_*.c, cli_mpi.c) on those; the
 * commands (cmd_*.c) on top, the MPI forms above the plain ones they fall back to; main.c routes to
 * them all. */

/* Create the library context from the global options (once; later calls return the same one).
 * main() owns it: commands must not free it. Prints the error and returns non-zero on failure.
 * (cli/cli_model.c) */
int cli_open_ctx(cli_globals *g, modattn_ctx **out);

/* Print "modattn: <what>: <library message>" to stderr and return 1. (cli/cli_text.c) */
int cli_fail(const char *what, int status);

/* Print j (consumed) as indented JSON on stdout; 1 with a message if building or writing it ran
 * out of memory. (cli/cli_text.c) */
struct json_t;
int cli_print_json(struct json_t *j);

/* true if argv[i] is -h or --help (cli/cli_text.c) */
bool cli_is_help(const char *arg);

/* Subcommands. */
int cli_cmd_backends(cli_globals *g, int argc, char **argv);
int cli_cmd_check(cli_globals *g, int argc, char **argv);
int cli_cmd_explain(cli_globals *g, int argc, char **argv);
int cli_cmd_bench(cli_globals *g, int argc, char **argv);
int cli_cmd_embed(cli_globals *g, int argc, char **argv);
int cli_cmd_index(cli_globals *g, int argc, char **argv);
int cli_cmd_search(cli_globals *g, int argc, char **argv);
int cli_cmd_devices(cli_globals *g, int argc, char **argv);
int cli_cmd_serve(cli_globals *g, int argc, char **argv);
int cli_cmd_stats(cli_globals *g, int argc, char **argv);

/* Load the model in dir on the global --device (the CPU when none). (cli/cli_model.c) */
int cli_load_model(cli_globals *g, modattn_ctx *ctx, const char *dir, modattn_model **out);
/* One line per op the model runs on the host instead of its device (--host-fallback), with why. */
void cli_explain_fallbacks(const modattn_model *m, FILE *f);

/* The model directory: `given` (--model) if not NULL, else $MODATTN_MODEL, else
 * <executable dir>/../.models/all-MiniLM-L6-v2 if it exists, else ./.models/all-MiniLM-L6-v2.
 * buf (PATH_MAX + 64 bytes) may hold the result. (cli/cli_model.c) */
const char *cli_model_dir(const char *given, char *buf, size_t len);
/* A model named by path, or by NAME / ORG/NAME (cli/cli_model.c): $MODATTN_MODELS, the installed
 * data folder, .models, the Hugging Face cache; the name itself when nothing is found. */
const char *cli_model_resolve(const char *name, char *buf, size_t len);
/* What the resolution looks at, for `modattn models` (cli/cmd_models.c) to list the same places:
 * a folder with a config.json; the folders that hold models by name (at most max, returns how
 * many); the Hugging Face cache's hub folder ("" when none); a models--ORG--NAME folder's snapshot. */
#include <limits.h>
bool cli_is_model_dir(const char *dir);
int cli_model_roots(char roots[][PATH_MAX], int max);
void cli_hf_hub(char *buf, size_t len);
bool cli_hf_snapshot(const char *repo_dir, char *out, size_t len);
int cli_cmd_models(cli_globals *g, int argc, char **argv);
/* `rerank` (cli/cmd_rerank.c) and what `search --rerank` shares with it: the reranker loaded with
 * the global options (device "auto" runs on the CPU; NAME resolved as --model), the order of
 * scores best first (ties by index; 1 on memory), and the limits a call keeps to. */
struct modattn_reranker;
#define CLI_RERANK_MAX_TEXTS 1000
#define CLI_RERANK_MAX_BYTES (1 << 20)
int cli_cmd_rerank(cli_globals *g, int argc, char **argv);
int cli_load_reranker(cli_globals *g, modattn_ctx *ctx, const char *dir, struct modattn_reranker **out);
/* The SPLADE model in dir (a path, or a name `modattn models` finds) with the global device options
 * (cli/cmd_embed.c; `embed --sparse` and `serve --sparse-model`). */
struct modattn_sparse_encoder;
int cli_load_sparse(cli_globals *g, modattn_ctx *ctx, const char *dir, struct modattn_sparse_encoder **out);
int cli_rerank_order(const float *scores, size_t n, size_t *order);
/* `search --rerank`: what cli_search_print adds to the next results it prints (NULL: nothing) —
 * the reranker's name, and for the first n results their first-stage rank and score. */
typedef struct cli_search_rerank {
    const char *model;
    const int *first_rank;
    const float *first_score;
    size_t n;
} cli_search_rerank;
void cli_search_print_rerank(const cli_search_rerank *rr);
int cli_cmd_ls(cli_globals *g, int argc, char **argv);
int cli_cmd_rm(cli_globals *g, int argc, char **argv);
int cli_cmd_export(cli_globals *g, int argc, char **argv); /* cli/cmd_export.c */
struct cli_index_args;
struct cli_index_job;
/* `index --watch` after the first pass: passes on file system events until SIGINT/SIGTERM; the
 * exit status (cli/cmd_watch.c) */
int cli_index_watch(const struct cli_index_args *a, struct cli_index_job *j);
/* The same, but a store that records the model folder it was indexed with (modattn index does) and
 * whose folder is still there comes first after --model and MODATTN_MODEL: a store remembers its
 * model. store may be NULL; db (when store is NULL and db exists) is peeked read-only. */
const char *cli_model_dir_for_store(const char *given, struct modattn_store *store, const char *db, char *buf, size_t len);
/* A stored absolute path as the user sees it: relative to the current directory when it lies
 * under it, else unchanged. Returns buf or abs. (cli/cli_model.c) */
const char *cli_rel_path(const char *abs, char *buf, size_t len);

/* Text leaving the process (cli/cli_text.c). */
/* s for a terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8 as \xHH, the rest
 * as it is; into buf (cap bytes, cut at a character), which it returns. */
const char *cli_term_text(const char *s, char *buf, size_t cap);
/* obj[key] = path; a path that is not UTF-8 goes there with U+FFFD for each ill-formed sequence and,
 * losslessly, as hex of its bytes in obj[key + "_bytes"]. 0 or -1 (allocation). */
int cli_json_set_path(struct json_t *obj, const char *key, const char *path);
/* s as a JSON string, U+FFFD for each ill-formed UTF-8 sequence (messages; not for names). */
struct json_t *cli_json_text(const char *s);
/* A JSON document that could not be made: says why (a refused allocation or an encoding), 1. */
int cli_json_fail(const char *what);
/* Flushes stdout: 0 if all written so far got there, else 1, having said so once on stderr (quiet
 * for a closed pipe). cli_finish_stdout: the exit code with that applied. */
int cli_stdout_check(void);
int cli_finish_stdout(int rc);

/* Option values (cli/cli_args.c): 0, or -1 having said on stderr what OPT wants (a usage error:
 * exit 2). Empty values, trailing characters and overflow are refused. */
int cli_parse_ll(const char *opt, const char *v, long long lo, long long hi, long long *out);
/* --name VALUE or --name=VALUE at argv[*i] (the value, *i past it); NULL if argv[*i] is not this
 * option, or it has no value (then *missing is set). */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, bool *missing);
int cli_parse_u64(const char *opt, const char *v, uint64_t *out); /* decimal or 0x; no sign */
int cli_parse_double(const char *opt, const char *v, double lo, double hi, bool lo_open, double *out);
/* the same, saying nothing when say is false (an MPI rank other than 0: rank 0 says it once) */
int cli_parse_double_say(const char *opt, const char *v, double lo, double hi, bool lo_open, bool say, double *out);
/* Exactly n comma-separated integers in [lo, hi] into v: 0, else -1 (says nothing). */
int cli_parse_ints(const char *s, int64_t *v, int n, int64_t lo, int64_t hi);
/* A file the run will write at its end (--trace): its folder exists and is writable, and the file,
 * if there, is writable and not a folder. Checked at start-up, before hours of work. */
int cli_check_output_path(const char *opt, const char *path);

/* true if arg is among argv[1..argc) before a "--" (cli/cli_args.c) */
bool cli_has_arg(int argc, char **argv, const char *arg);
/* `index --mpi` and `search --mpi` (cli/cmd_mpi.c, cli/cmd_mpi_search.c), which main calls when
 * --mpi is among the command's arguments (argv as the command gets it, --mpi included): under
 * mpirun -np N (N > 1) the distributed run; with one process, or for --help, the plain command.
 * In a build without MPI they say how to install it. */
int cli_cmd_index_mpi(cli_globals *g, int argc, char **argv);
int cli_cmd_search_mpi(cli_globals *g, int argc, char **argv);

/* What `search` prints for one query's results (cli/cli_search_out.c): text, or JSON (batch_query
 * non-NULL: one line with "query" batch_no and "text"); tty_marks: mark the query's words with
 * terminal attributes (1), with « » (0), or as stdout is a terminal or not (-1). 0, or the exit
 * status of a failure to write JSON. */
struct modattn_search_params;
struct modattn_search_info;
struct modattn_search_result;
int cli_search_print(const struct modattn_search_params *sp, const struct modattn_search_info *info,
                     const struct modattn_search_result *res, size_t n, bool json, int tty_marks, size_t batch_no,
                     const char *batch_query);
/* `search`'s options and QUERY words (cli/cli_search_args.c), shared by the plain command and
 * `search --mpi`. Not to be copied: a->sp.ann points at a->annp when --ann-params is given, and
 * a->sp.embed at a->eo. */
#include "modattn/ann.h"
#include "modattn/search.h"
typedef struct cli_search_args {
    const char *db, *model_dir, *queries_file; /* --db (default MODATTN_STORE_DEFAULT_PATH), --model, --queries */
    bool json;
    long long k;                              /* -k (MODATTN_SEARCH_DEFAULT_K, 10) */
    char *query;                              /* the QUERY words joined by spaces (NULL with --queries) */
    modattn_search_params sp;                 /* --mode, --rrf-k, --keyword-weight, --exact, --ann; k */
    modattn_ann_params annp;                  /* --ann-params */
    modattn_embed_options eo;                 /* --prompt-name, --prompt (sp.embed points here) */
    const char *sparse_dir;                   /* --sparse (NULL: the store's, when it has sparse vectors) */
} cli_search_args;
/* 0: parsed; -1: --help asked (nothing said); 1: out of memory; 2: a usage error; 3: no QUERY
 * given (a usage error too: the caller may print the usage). Errors are said on stderr when say.
 * Free with cli_search_args_free. */
int cli_search_parse(int argc, char **argv, bool say, cli_search_args *a);
void cli_search_args_free(cli_search_args *a);

/* The lines of path ("-": standard input), blank ones left out, into *out (strings and array
 * from modattn__malloc, counted against --mem-budget: free each and the array with modattn_free);
 * 0, or the exit status after printing why not (a line over CLI_MAX_LINE bytes, memory, I/O). */
int cli_read_queries(const char *path, char ***out, size_t *n);

/* Standard output through a writer that keeps the first write error, so a failure says why
 * ("No space left on device"); called first thing in main. */
void cli_stdout_init(void);

/* The longest input line `embed -` and `search --queries` take (the README's limits). */
#define CLI_MAX_LINE ((size_t)16 << 20)
/* One line of f (its newline kept, if it had one) into *buf (grown with modattn__realloc, so it
 * counts against --mem-budget; *cap its size), *len its bytes, NUL-terminated. A line is never
 * cut: 1 a line; 0 end of input; -1 the line is longer than max (the rest of it is not read);
 * -2 out of memory (or over the budget); -3 a read error (errno says which). */
int cli_read_line(FILE *f, char **buf, size_t *cap, size_t *len, size_t max);
/* The message for a cli_read_line failure r (< 0) on line lineno of what. */
void cli_line_error(const char *cmd, const char *what, size_t lineno, int r);

/* ---- prompts and Matryoshka dimensions (cli/cli_prompt.c), for embed, index and search */
#include "modattn/model.h"
/* --prompt-name NAME, --prompt TEXT and (dims) --dimensions N at argv[*i] into eo (*i past the
 * value): 0 taken, -1 not one of them, 2 a usage error (said when say). */
int cli_prompt_option(const char *cmd, int argc, char **argv, int *i, bool dims, bool say, modattn_embed_options *eo);
/* Against the loaded model: --dimensions past its dimension, a --prompt-name it lacks (listing its
 * prompts): 2 having said so (a usage error), else 0. */
int cli_prompt_check(const char *cmd, const modattn_model *m, const modattn_embed_options *eo, bool say);
/* "modattn: note: CMD: WHAT the model's "query" prompt: "query: "" on stderr, when a prompt applies
 * (what: "chunks get", "the query gets"). */
void cli_prompt_say(const char *cmd, const modattn_model *m, const modattn_embed_options *eo, const char *what);

/* ---- `modattn index`: parse (cli/cli_index_args.c) -> run (cli/cmd_index.c; its MPI form
 * cli/cmd_mpi.c) -> print (cli/cli_index_out.c) */
#include <jansson.h>
#include "modattn/ingest.h"
#include "core/internal_core.h"

/* `index`'s options and PATHs, shared by the plain command and `index --mpi`. */
typedef struct cli_index_args {
    const char *db, *model_dir;               /* --db (default MODATTN_STORE_DEFAULT_PATH), --model */
    const char *sparse_dir;                   /* --sparse (NULL: the store's, if it records one) */
    bool json, quiet, prune, verbose;
    bool watch;                               /* --watch: keep the store current (cli/cmd_watch.c) */
    double debounce_s;                        /* --debounce (watch: quiet time before a pass) */
    double wait_s, file_timeout_s;            /* --wait, --file-timeout (0: no limit) */
    long long chunk_tokens, overlap, batch;   /* 0, -1, 0: the library's defaults */
    int64_t max_size;                         /* --max-file-size (0: the default) */
    const char *ann_kind, *ann_params;        /* --ann, --ann-params as given (NULL: none) */
    modattn_ann_kind kind;                    /* --ann parsed */
    modattn_ann_params annp;                  /* --ann-params parsed */
    const char **paths;                       /* the PATHs, or the roots refreshed (cli_index_roots) */
    size_t npaths;
    bool refresh;                             /* no PATH (and no --ann): the store's roots again */
    char **roots;                             /* those roots (owned) */
    size_t nroots;
    modattn_embed_options eo;                 /* --prompt-name, --prompt, --dimensions */
} cli_index_args;
/* 0: parsed; -1: --help asked (nothing said); 1: out of memory; 2: a usage error. Errors are said
 * on stderr when say. Free with cli_index_args_free (also after a failure). */
int cli_index_parse(int argc, char **argv, bool say, cli_index_args *a);
/* With no PATH (and no --ann): the folders and files the store records, as the PATHs (said, when
 * say and not --quiet/--json). 0, 1 out of memory, 2 none recorded (a usage error, said with the
 * usage when say). */
int cli_index_roots(cli_index_args *a, bool say);
void cli_index_args_free(cli_index_args *a);
void cli_index_usage(FILE *f);
/* The library's options from the command's (no callbacks set). */
void cli_index_options(const cli_index_args *a, modattn_index_options *o);

/* What `index` tells about each file (cli/cli_index_out.c): events printed on stderr (errors
 * always; skipped and pruned files unless quiet; none with json) and gathered for --json. */
typedef struct cli_index_ui {
    bool json, quiet, tty;
    bool verbose;           /* every skipped file said, those skipped before included */
    bool line_shown;        /* a progress line is on the terminal */
    json_t *said;           /* the reasons for skipping said once this run (without --verbose) */
    size_t not_said;        /* skipped files not said: a reason said already, or skipped before */
    json_t *errors, *skipped;
    int oom;
} cli_index_ui;
/* modattn_index_options.on_event, with ud a cli_index_ui */
void cli_index_on_event(void *ud, modattn_index_event ev, const char *path, const char *msg);
/* modattn_index_options.on_progress: the progress line on a terminal, with ud a cli_index_ui */
void cli_index_on_progress(void *ud, const modattn_index_progress *p);
/* the ANN build's progress (modattn_store_update_ann), with ud a cli_index_ui */
void cli_index_on_ann_progress(void *ud, const char *phase, size_t done, size_t total);
/* modattn_store_set_wait's note: "modattn: note: ..." */
void cli_index_note_wait(void *ud, const char *msg);
void cli_index_clear_line(cli_index_ui *ui); /* erases the progress line, if one is shown */

/* One index run: what it holds and what came of it. */
typedef struct cli_index_job {
    modattn_ctx *ctx;         /* borrowed (cli_open_ctx) */
    modattn_model *model;
    struct modattn_sparse_encoder *sparse; /* --sparse, or the store's (NULL: none) */
    modattn_store *store;     /* rank 0 / the plain run only */
    const char *model_dir;
    char mbuf[PATH_MAX + 64];
    cli_index_ui ui;
    modattn_index_options o;  /* the options, callbacks set to ui's */
    modattn_index_stats s;
    double secs;
    modattn_ann_update au;    /* the ANN index's update (asked for, or kept up to date) */
    char ann_err[1024];       /* why keeping it up to date failed ("" if it did not) */
    int st;                   /* the library status that stopped the run (0: none) */
    int rc;                   /* the exit status so far */
} cli_index_job;
/* The context and the model (--model, else the store's, else the default); the library status,
 * with *what naming the step (the context's failure is said already: *what is then NULL). */
int cli_index_load(cli_globals *g, const cli_index_args *a, cli_index_job *j, const char **what);
/* The store (created if missing), its note, the wait for another writer, the events' gatherer and
 * the options: a library status (0: j->store open). (cli/cmd_index.c) */
int cli_index_open_store(const cli_index_args *a, cli_index_job *j);
/* After the documents: the roots and the model folder recorded, then the ANN index (asked for:
 * built; else the run's update, with a warning if it failed). Sets j->st, j->rc. (cli/cmd_index.c) */
void cli_index_finish(const cli_index_args *a, cli_index_job *j);
/* The summary (text, or --json) on stdout; nranks > 0: the run's processes (`index --mpi`). The
 * exit status: 0, 1 (the run stopped: said; memory; output), 3 (some files unreadable). */
int cli_index_print(const cli_index_args *a, cli_index_job *j, int nranks);
void cli_index_job_free(cli_index_job *j);

#endif
