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
#include "modattn/rerank.h"
#include "modattn/sparse.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "core/internal_status.h"
#include "pipeline/internal_search.h"
#include "pipeline/pipeline_internal.h"

static void search_usage(FILE *f) {
    fprintf(f,
            "usage: modattn search [--db FILE] [--model DIR] [-k N] [--mode M] [--json]\n"
            "                      [--prompt-name NAME | --prompt TEXT] QUERY...\n"
            "       modattn search [OPTIONS] --queries FILE\n\n"
            "Print the k stored chunks that best answer QUERY (the words joined by spaces), best\n"
            "first: rank, the chunk's cosine with the query (BM25 in keyword mode), path, location\n"
            "(byte range in the document's text, and its line, or its page for a PDF), which\n"
            "rankings found it (meaning, words, or both) and its best-matching window with the\n"
            "query's words that matter marked.\n"
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
            "  sparse     by learned sparse vectors (SPLADE, from `index --sparse`): the dot\n"
            "             product of the query's with each chunk's over the store's inverted\n"
            "             index. On such a store, hybrid fuses this ranking too: + S/(K + its\n"
            "             sparse rank)\n"
            "The query's words are matched as plain words whatever they hold: quotes, AND, OR, NOT,\n"
            "NEAR, *, ^, column filters and parentheses are searched for as text, never obeyed;\n"
            "a word ending in * is a prefix (recurs* finds recursion). Stop words (\"the\", \"on\":\n"
            "13 languages' lists) and words most chunks hold find nothing by themselves; a word no\n"
            "chunk holds is searched as a prefix of the store's words, or, when no other word of\n"
            "the query is in the store, as its nearest word (a typo: recursivly finds\n"
            "recursively), said in a note.\n\n"
            "options:\n"
            "  --db FILE            the store made by `modattn index` (default ./" MODATTN_STORE_DEFAULT_PATH ")\n"
            "  --model DIR          model directory, as for `modattn index` (default: $MODATTN_MODEL,\n"
            "                       else all-MiniLM-L6-v2 in <executable dir>/../.models, ../share/\n"
            "                       modattn/models (make install), ~/.local/share/modattn/models,\n"
            "                       ./.models); it must be the store's model\n"
            "  -k N                 number of results (default 10, as the server and Python)\n"
            "  --prompt-name NAME   embed the query with the model's prompt NAME; default: its\n"
            "                       \"query\" prompt (as sentence-transformers' encode_query),\n"
            "                       said when used. It must be the prompt the store was indexed\n"
            "                       for; the store's --dimensions apply by themselves\n"
            "  --prompt TEXT        embed the query with TEXT before it ('': no prompt)\n"
            "  --mpi                under mpirun -np N: scan the vectors on N processes (README: MPI)\n"
            "  --mode M             hybrid (default), vector, keyword or sparse\n"
            "  --sparse DIR         the SPLADE model of the store's sparse vectors (default: the\n"
            "                       one the store records, from `index --sparse`)\n"
            "  --sparse-weight W    hybrid: the sparse ranking's weight (default 0.6)\n"
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
            "                       \"line\", \"page\", \"text\", \"highlights\", \"found_by\", \"snippet\"},\n"
            "                       ...]}: ranks null when that\n"
            "                       ranking did not bring the chunk; highlights: [start, end) byte\n"
            "                       ranges of text that the query's words match; \"found_by\":\n"
            "                       \"meaning\", \"words\" or \"both\"; \"snippet\": [start, end) of\n"
            "                       text, the window the text output shows; with --queries one\n"
            "                       such object per line (JSON lines), with \"query\" (1-based) and\n"
            "                       \"text\" (the query); \"index\": what found the candidates by\n"
            "                       meaning (\"exact\", or the index's kind: \"hnsw\", \"ivf-sq8\",\n"
            "                       \"ivf-pq\", \"f16\", \"int8\", \"binary\"), and\n"
            "                       \"index_note\" when an ANN index there was not used, and why\n"
            "  --rerank DIR         re-score the first --rerank-top candidates with the cross-encoder\n"
            "                       in DIR (query and passage read together; see `modattn rerank`) and\n"
            "                       print them in its order: \"score\" is then the cross-encoder's, and\n"
            "                       the JSON keeps \"first_stage_rank\" and \"first_stage_score\"\n"
            "  --rerank-top N       how many first-stage candidates are re-scored (default 50, at most\n"
            "                       %d); the first k of the new order are printed\n"
            "  -h, --help           this help\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n",
            CLI_RERANK_MAX_TEXTS);
}

/* --rerank DIR / --rerank-top N taken out of argv (the rest is `search`'s shared parser's). 0, or
 * the exit status of a usage error. */
static int take_rerank_args(int *argc, char **argv, const char **dir, long long *top) {
    int o = 1;
    bool dashdash = false;
    for (int i = 1; i < *argc; i++) {
        bool missing = false;
        const char *v;
        if (!dashdash && strcmp(argv[i], "--") == 0) dashdash = true;
        if (!dashdash && ((v = cli_opt_value(*argc, argv, &i, "--rerank-top", &missing)) || missing)) {
            if (missing || cli_parse_ll("--rerank-top", v, 1, CLI_RERANK_MAX_TEXTS, top)) {
                if (missing) fprintf(stderr, "modattn: search: --rerank-top needs a value\n");
                return 2;
            }
            continue;
        }
        if (!dashdash && ((v = cli_opt_value(*argc, argv, &i, "--rerank", &missing)) || missing)) {
            if (missing || !*v) {
                fprintf(stderr, "modattn: search: --rerank needs a cross-encoder's directory\n");
                return 2;
            }
            *dir = v;
            continue;
        }
        argv[o++] = argv[i];
    }
    *argc = o;
    argv[o] = NULL;
    return 0;
}

/* One query's results re-scored by the cross-encoder: the first `top` re-ordered by its score
 * (ties: first-stage order), rank and score replaced; the first-stage ones kept in fr/fs. */
static int rerank_results(modattn_reranker *r, const char *query, modattn_search_result *res, size_t n, size_t top,
                          int *fr, float *fs) {
    if (n > top) n = top;
    for (size_t i = 0; i < n; i++) fr[i] = res[i].rank, fs[i] = res[i].score;
    if (n == 0) return 0;
    const char **q = malloc(n * sizeof *q), **p = malloc(n * sizeof *p);
    float *sc = malloc(n * modattn_reranker_get_info(r)->num_labels * sizeof *sc);
    size_t *order = malloc(n * sizeof *order);
    modattn_search_result *tmp = malloc(n * sizeof *tmp);
    int *tfr = malloc(n * sizeof *tfr);
    float *tfs = malloc(n * sizeof *tfs);
    int st = 0;
    if (!q || !p || !sc || !order || !tmp || !tfr || !tfs) {
        st = modattn__error(MODATTN_ENOMEM, "reranking %zu results", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) q[i] = query, p[i] = res[i].chunk.text ? res[i].chunk.text : "";
    if ((st = modattn_reranker_score(r, NULL, q, NULL, p, NULL, n, 0, sc, NULL, NULL))) goto out;
    if (cli_rerank_order(sc, n, order)) {
        st = modattn__error(MODATTN_ENOMEM, "reranking %zu results", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) tmp[i] = res[order[i]], tfr[i] = fr[order[i]], tfs[i] = fs[order[i]];
    for (size_t i = 0; i < n; i++) {
        res[i] = tmp[i], fr[i] = tfr[i], fs[i] = tfs[i];
        res[i].rank = (int)i + 1;
        res[i].score = sc[order[i]];
    }
out:
    free(q), free(p), free(sc), free(order), free(tmp), free(tfr), free(tfs);
    return st;
}

int cli_cmd_search(cli_globals *g, int argc, char **argv) {
    const char *rerank_dir = NULL;
    long long rerank_top = 50;
    int trc = take_rerank_args(&argc, argv, &rerank_dir, &rerank_top);
    if (trc) return trc;
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
    modattn_reranker *reranker = NULL;
    modattn_sparse_encoder *sparse = NULL;
    int *first_rank = NULL;
    float *first_score = NULL;
    const size_t k_print = sp.k;
    if (rerank_dir && sp.k < (size_t)rerank_top) sp.k = (size_t)rerank_top; /* the candidates to re-score */
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
    /* the sparse ranking: sparse mode, or hybrid on a store with sparse vectors */
    if (sp.mode == MODATTN_SEARCH_SPARSE || (sp.mode == MODATTN_SEARCH_HYBRID && modattn__store_has_sparse(store))) {
        modattn__sparse_ident sid;
        bool have = false;
        if ((st = modattn__store_sparse_get(store, &sid, &have))) {
            rc = cli_fail("reading the store", st);
            goto out;
        }
        if (!have) {
            fprintf(stderr, "modattn: search: %s has no sparse vectors: index it with `modattn index --sparse DIR` "
                            "(into a new store), or search with --mode hybrid, vector or keyword\n", db);
            rc = 2;
            goto out;
        }
        const char *sdir = args.sparse_dir ? args.sparse_dir : sid.dir;
        if ((st = cli_load_sparse(g, ctx, sdir, &sparse))) {
            rc = cli_fail("loading the sparse model", st);
            goto out;
        }
        sp.sparse = sparse;
    }
    if (rerank_dir) {
        if ((st = cli_load_reranker(g, ctx, rerank_dir, &reranker))) {
            rc = cli_fail("loading the reranker (--rerank)", st);
            goto out;
        }
        if (modattn_reranker_get_info(reranker)->num_labels != 1) { /* an order needs one relevance score */
            fprintf(stderr,
                    "modattn: search: --rerank needs a cross-encoder with one label (a relevance score); %s "
                    "has %zu labels: see its label scores with `modattn rerank --model %s QUERY PASSAGE...`\n",
                    rerank_dir, modattn_reranker_get_info(reranker)->num_labels, rerank_dir);
            rc = 2;
            goto out;
        }
        first_rank = malloc((size_t)rerank_top * sizeof *first_rank);
        first_score = malloc((size_t)rerank_top * sizeof *first_score);
        if (!first_rank || !first_score) {
            fprintf(stderr, "modattn: search: out of memory\n");
            rc = 1;
            goto out;
        }
    }
    if ((rc = cli_prompt_check("search", model, &args.eo, true))) goto out;
    if (sp.mode != MODATTN_SEARCH_KEYWORD && !json) {
        modattn_embed_options eo = args.eo;
        eo.task = MODATTN_EMBED_QUERY;
        cli_prompt_say("search", model, &eo, nq == 1 ? "the query gets" : "the queries get");
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
        if (notes[i].keywords[0]) { /* words searched for other than as typed: a prefix, a typo's nearest word */
            if (queries_file) fprintf(stderr, "modattn: note: query %zu: words searched for: %s\n", i + 1, cli_term_text(notes[i].keywords, nbuf, sizeof nbuf));
            else fprintf(stderr, "modattn: note: words searched for: %s\n", cli_term_text(notes[i].keywords, nbuf, sizeof nbuf));
        }
        size_t shown = nres[i] < k_print ? nres[i] : k_print;
        cli_search_rerank rr; /* lives until cli_search_print has printed with it */
        if (reranker) {
            size_t nr = nres[i] < (size_t)rerank_top ? nres[i] : (size_t)rerank_top;
            if ((st = rerank_results(reranker, qs[i], res[i], nres[i], (size_t)rerank_top, first_rank, first_score))) {
                rc = cli_fail("rerank", st);
                break;
            }
            rr = (cli_search_rerank){modattn_reranker_get_info(reranker)->name, first_rank, first_score, nr};
            cli_search_print_rerank(&rr);
        }
        rc = cli_search_print(&sp, &info, res[i], shown, json, -1, i + 1, queries_file ? qs[i] : NULL);
        cli_search_print_rerank(NULL);
    }
    if (cli_stdout_check()) rc = 1;
out:
    for (size_t i = 0; res && nres && i < nq; i++) modattn_search_results_free(res[i], nres[i]);
    free(res);
    free(nres);
    free(notes);
    modattn_sparse_free(sparse);
    modattn_model_free(model);
    modattn_reranker_free(reranker);
    free(first_rank);
    free(first_score);
    modattn_store_close(store);
    if (queries_file) {
        for (size_t i = 0; i < nq; i++) modattn_free(qs[i]);
        modattn_free(qs);
    }
    free(query);
    return rc;
}
