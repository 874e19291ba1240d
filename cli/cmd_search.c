/* cli/cmd_search.c — `modattn search`: the chunks of a store closest in meaning to a query.
 * Front end only: options and printing; the work is modattn__search (pipeline/search.c). */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"

static void search_usage(FILE *f) {
    fprintf(f,
            "usage: modattn search [--db FILE] [--model DIR] [-k N] [--mode M] [--json] QUERY...\n"
            "       modattn search [OPTIONS] --queries FILE\n\n"
            "Print the k stored chunks that best answer QUERY (the words joined by spaces), best\n"
            "first: rank, score, path, location (byte range in the document's text, and its line,\n"
            "or its page for a PDF) and a snippet with the query's words marked.\n"
            "With --queries, every line of FILE (- for standard input) is a query, answered in\n"
            "one batch: the queries embedded together and the stored vectors read once for all of\n"
            "them (the same results as one query at a time, much faster for many).\n\n"
            "modes (--mode):\n"
            "  hybrid     (default) both rankings below, fused by reciprocal rank: a chunk's score\n"
            "             is 1/(K + its rank by meaning) + W/(K + its rank by words); finds what\n"
            "             is said in other words and what is named exactly (a command, an error\n"
            "             code, a rare term). Without a keyword index (a store made before it, or an\n"
            "             SQLite without FTS5), or when no chunk holds the query's words: by meaning.\n"
            "  vector     by meaning: cosine of the query's embedding with every stored one (exact)\n"
            "  keyword    by words: BM25 over the chunks' texts and file names (SQLite FTS5)\n"
            "The query's words are matched as plain words whatever they hold: quotes, AND, OR, NOT,\n"
            "NEAR, *, ^, column filters and parentheses are searched for as text, never obeyed.\n\n"
            "options:\n"
            "  --db FILE            the store made by `modattn index` (default ./" MODATTN_STORE_DEFAULT_PATH ")\n"
            "  --model DIR          model directory, as for `modattn index` (default: $MODATTN_MODEL,\n"
            "                       else all-MiniLM-L6-v2 in <executable dir>/../.models, ../share/\n"
            "                       modattn/models (make install), ~/.local/share/modattn/models,\n"
            "                       ./.models); it must be the store's model\n"
            "  -k N                 number of results (default 5)\n"
            "  --mpi                under mpirun -np N: scan the vectors on N processes (README: MPI)\n"
            "  --mode M             hybrid (default), vector or keyword\n"
            "  --rrf-k K            hybrid: the fusion's K (default 10)\n"
            "  --keyword-weight W   hybrid: the word ranking's weight W, meaning's being 1 (default 0.7)\n"
            "  --queries FILE       one query per line (blank lines skipped; - reads standard input)\n"
            "  --exact              scan every vector even when the store has an ANN index (made by\n"
            "                       `modattn index --ann`; without --exact a current one finds the\n"
            "                       candidates by meaning, which are then scored exactly, when\n"
            "                       reading it costs less than scanning: for a big index, from a\n"
            "                       batch of --queries on; a note says which was chosen and why)\n"
            "  --ann                use the ANN index whatever it costs to read (an error if there is\n"
            "                       no usable one, saying why)\n"
            "  --ann-params P       the ANN index's search parameters for this search: efSearch=N\n"
            "                       (hnsw), nprobe=N (ivf), rescore=N (candidates scored exactly)\n"
            "  --json               {\"mode\", \"results\": [{\"rank\", \"score\", \"vector_rank\",\n"
            "                       \"keyword_rank\", \"cosine\", \"bm25\", \"path\", \"start\", \"end\",\n"
            "                       \"line\", \"page\", \"text\", \"highlights\"}, ...]}: ranks null when that\n"
            "                       ranking did not bring the chunk; highlights: [start, end) byte\n"
            "                       ranges of text that the query's words match; with --queries one\n"
            "                       such object per line (JSON lines), with \"query\" (1-based) and\n"
            "                       \"text\" (the query); \"index\": what found the candidates by\n"
            "                       meaning (\"exact\", or the index's kind: \"hnsw\", \"ivf-sq8\",\n"
            "                       \"ivf-pq\", \"f16\", \"int8\", \"binary\"), and\n"
            "                       \"index_note\" when an ANN index there was not used, and why\n"
            "  -h, --help           this help\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n");
}

int cli_cmd_search(cli_globals *g, int argc, char **argv) {
    cli_search_args args;
    int prc = cli_search_parse(argc, argv, true, &args);
    if (prc) {
        cli_search_args_free(&args);
        if (prc == -1) search_usage(stdout);
        if (prc == 3) {
            fputc('\n', stderr);
            search_usage(stderr);
        }
        return prc == -1 ? 0 : prc == 3 ? 2 : prc;
    }
    const char *const db = args.db, *model_dir = args.model_dir, *const queries_file = args.queries_file;
    const bool json = args.json;
    modattn_search_params sp = args.sp;
    char *query = args.query;
    char **qs = &query;
    size_t nq = 1;
    if (queries_file) {
        free(query);
        query = NULL;
        int qrc = cli_read_queries(queries_file, &qs, &nq);
        if (qrc) return qrc;
    }
    modattn_store *store = NULL;
    modattn_model *model = NULL;
    modattn_ctx *ctx = NULL;
    modattn_search_result **res = calloc(nq, sizeof *res);
    size_t *nres = calloc(nq, sizeof *nres);
    modattn_search_notes *notes = calloc(nq, sizeof *notes);
    int rc = 0, st = 0;
    if (!res || !nres || !notes) {
        fprintf(stderr, "modattn: search: out of memory\n");
        rc = 1;
        goto out;
    }
    st = modattn_store_open(db, MODATTN_STORE_READONLY, &store);
    if (st) {
        rc = cli_fail("opening the store", st);
        goto out;
    }
    if (modattn_store_note(store)) fprintf(stderr, "modattn: note: %s\n", modattn_store_note(store));
    if (cli_open_ctx(g, &ctx)) {
        rc = 1;
        goto out;
    }
    char mbuf[PATH_MAX + 64];
    model_dir = cli_model_dir_for_store(model_dir, store, NULL, mbuf, sizeof mbuf);
    /* a few queries: no packed weights (faster start, ~90 MB less); many: the fast GEMMs pay */
    g->few_inputs = nq <= 8;
    /* keywords alone need the model only to check the store is its own (and its tokenizer is
     * light); it is loaded the same way */
    if ((st = cli_load_model(g, ctx, model_dir, &model))) {
        rc = cli_fail("loading the model", st);
        goto out;
    }
    modattn_search_info info;
    if (!queries_file)
        st = modattn__search_with(store, model, query, &sp, modattn_ctx_exec(ctx), &res[0], &nres[0], &info, &notes[0]);
    else
        st = modattn__search_batch(store, model, (const char *const *)qs, nq, &sp, modattn_ctx_exec(ctx), res, nres,
                                  &info, notes);
    char nbuf[4 * sizeof info.index_note];
    if (!st && info.note[0]) /* said once per search: correct, but slower */
        fprintf(stderr, "modattn: note: searching the store itself (slower): %s; `modattn index` rewrites the vector file\n",
                cli_term_text(info.note, nbuf, sizeof nbuf));
    if (st) {
        rc = cli_fail("search", st);
        goto out;
    }
    if (info.index_note[0] && !json)
        fprintf(stderr, "modattn: note: the ANN index was not used (an exact scan instead): %s\n",
                cli_term_text(info.index_note, nbuf, sizeof nbuf));
    for (size_t i = 0; i < nq && !rc; i++) {
        if (notes[i].note[0]) {
            if (queries_file) fprintf(stderr, "modattn: note: query %zu: %s\n", i + 1, cli_term_text(notes[i].note, nbuf, sizeof nbuf));
            else fprintf(stderr, "modattn: note: %s\n", cli_term_text(notes[i].note, nbuf, sizeof nbuf));
        }
        rc = cli_search_print(&sp, &info, res[i], nres[i], json, -1, i + 1, queries_file ? qs[i] : NULL);
    }
    if (cli_stdout_check()) rc = 1;
out:
    for (size_t i = 0; res && nres && i < nq; i++) modattn_search_results_free(res[i], nres[i]);
    free(res);
    free(nres);
    free(notes);
    modattn_model_free(model);
    modattn_store_close(store);
    if (queries_file) {
        for (size_t i = 0; i < nq; i++) modattn_free(qs[i]);
        modattn_free(qs);
    }
    free(query);
    return rc;
}
