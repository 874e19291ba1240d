/* cli/cmd_search.c — `modattn search`: the chunks of a store closest in meaning to a query.
 * Front end only: options and printing; the work is modattn_search (pipeline/search.c). */
#include <errno.h>
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

#define SNIPPET_BYTES 240

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
            "                       else <executable dir>/../.models/all-MiniLM-L6-v2, else\n"
            "                       ./.models/all-MiniLM-L6-v2); it must be the store's model\n"
            "  -k N                 number of results (default 5)\n"
            "  --mpi                under mpirun -np N: scan the vectors on N processes (README: MPI)\n"
            "  --mode M             hybrid (default), vector or keyword\n"
            "  --rrf-k K            hybrid: the fusion's K (default 10)\n"
            "  --keyword-weight W   hybrid: the word ranking's weight W, meaning's being 1 (default 0.7)\n"
            "  --queries FILE       one query per line (blank lines skipped; - reads standard input)\n"
            "  --exact              scan every vector even when the store has an ANN index (made by\n"
            "                       `modattn index --ann`; without --exact a current one finds the\n"
            "                       candidates by meaning, which are then scored exactly)\n"
            "  --ann-params P       the ANN index's search parameters for this search: efSearch=N\n"
            "                       (hnsw), nprobe=N (ivf), rescore=N (candidates scored exactly)\n"
            "  --json               {\"mode\", \"results\": [{\"rank\", \"score\", \"vector_rank\",\n"
            "                       \"keyword_rank\", \"cosine\", \"bm25\", \"path\", \"start\", \"end\",\n"
            "                       \"line\", \"page\", \"text\", \"highlights\"}, ...]}: ranks null when that\n"
            "                       ranking did not bring the chunk; highlights: [start, end) byte\n"
            "                       ranges of text that the query's words match; with --queries one\n"
            "                       such object per line (JSON lines), with \"query\" (1-based) and\n"
            "                       \"text\" (the query); \"index\": what found the candidates by\n"
            "                       meaning (\"exact\", \"hnsw\", \"ivf-sq8\", \"ivf-pq\"), and\n"
            "                       \"index_note\" when an ANN index there was not used, and why\n"
            "  -h, --help           this help\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n");
}

/* One piece of the snippet: whitespace collapsed (across pieces, via *space), escaped for the
 * terminal, appended to out. */
static void put_piece(const char *t, size_t a, size_t b, bool *space, char *out, size_t *o, size_t cap) {
    char raw[SNIPPET_BYTES * 2 + 16], safe[4 * (SNIPPET_BYTES * 2 + 16)];
    size_t r = 0;
    for (size_t i = a; i < b && r + 2 < sizeof raw; i++) {
        const unsigned char c = (unsigned char)t[i];
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            *space = true;
            continue;
        }
        if (*space && (*o > 0 || r > 0)) raw[r++] = ' ';
        *space = false;
        raw[r++] = (char)c;
    }
    raw[r] = '\0';
    const char *e = cli_term_text(raw, safe, sizeof safe);
    size_t n = strlen(e);
    if (*o + n + 1 > cap) n = cap - *o - 1;
    memcpy(out + *o, e, n);
    *o += n;
    out[*o] = '\0';
}

/* The chunk's text on one line around its first match (or from its start), whitespace collapsed,
 * the query's words marked (bold on a terminal, else with « »), escaped for the terminal. */
static void snippet(const modattn_search_result *r, bool tty, char *out, size_t cap) {
    const char *t = r->chunk.text;
    const size_t len = strlen(t);
    size_t from = 0;
    if (r->nspans && r->spans[0].start > 60) from = r->spans[0].start - 60;
    while (from > 0 && ((unsigned char)t[from] & 0xc0) == 0x80) from--; /* a character's first byte */
    size_t to = from + SNIPPET_BYTES < len ? from + SNIPPET_BYTES : len;
    while (to < len && ((unsigned char)t[to] & 0xc0) == 0x80) to++;
    const char *on = tty ? "\033[1m" : "\xc2\xab", *off = tty ? "\033[0m" : "\xc2\xbb";
    size_t o = 0;
    bool space = false;
    out[0] = '\0';
    if (from > 0) put_piece("\xe2\x80\xa6", 0, 3, &space, out, &o, cap);
    size_t at = from;
    for (size_t i = 0; i < r->nspans && at < to; i++) {
        size_t a = r->spans[i].start, b = r->spans[i].end;
        if (b <= at || a >= to || b > len) continue;
        if (a < at) a = at;
        if (b > to) b = to;
        put_piece(t, at, a, &space, out, &o, cap);
        if (space && o > 0 && o + 1 < cap) out[o++] = ' ', out[o] = '\0';
        space = false;
        if (o + strlen(on) + 1 < cap) o += (size_t)snprintf(out + o, cap - o, "%s", on);
        put_piece(t, a, b, &space, out, &o, cap);
        if (o + strlen(off) + 1 < cap) o += (size_t)snprintf(out + o, cap - o, "%s", off);
        at = b;
    }
    put_piece(t, at, to, &space, out, &o, cap);
    if (to < len && o + 4 < cap) o += (size_t)snprintf(out + o, cap - o, "\xe2\x80\xa6");
}

/* Prints one query's results (batch: its 1-based number and text, JSON as one line). 0, or the
 * exit status of a failure to write JSON. */
static int print_results(const modattn_search_params *sp, const modattn_search_info *info,
                         const modattn_search_result *res, size_t n, bool json, size_t batch_no,
                         const char *batch_query) {
    int rc = 0;
    if (json) {
        json_t *arr = json_array();
        int bad = !arr;
        for (size_t i = 0; i < n && !bad; i++) {
            char pbuf[PATH_MAX];
            const modattn_store_chunk *c = &res[i].chunk;
            const modattn_search_result *r = &res[i];
            json_t *o = json_pack("{s:i, s:f, s:o, s:o, s:o, s:o}", "rank", r->rank, "score", (double)r->score,
                                  "vector_rank", r->vector_rank ? json_integer(r->vector_rank) : json_null(),
                                  "keyword_rank", r->keyword_rank ? json_integer(r->keyword_rank) : json_null(),
                                  "cosine", isfinite(r->cosine) ? json_real((double)r->cosine) : json_null(),
                                  "bm25", isfinite(r->bm25) ? json_real(r->bm25) : json_null());
            json_t *hl = json_array();
            for (size_t h = 0; hl && h < r->nspans; h++)
                if (json_array_append_new(hl, json_pack("[I, I]", (json_int_t)r->spans[h].start,
                                                        (json_int_t)r->spans[h].end)))
                    bad = 1;
            if (!o || !hl || json_object_set_new(o, "highlights", hl)) bad = 1;
            if (bad || cli_json_set_path(o, "path", cli_rel_path(c->path, pbuf, sizeof pbuf)) ||
                json_object_set_new(o, "start", json_integer((json_int_t)c->start)) ||
                json_object_set_new(o, "end", json_integer((json_int_t)c->end)) ||
                json_object_set_new(o, "line", json_integer((json_int_t)c->line)) ||
                json_object_set_new(o, "page", json_integer((json_int_t)c->page)) ||
                json_object_set_new(o, "text", cli_json_text(c->text)) || json_array_append_new(arr, o))
                bad = 1;
        }
        json_t *j = bad ? NULL : json_pack("{s:s, s:o}", "mode", modattn_search_mode_name(sp->mode), "results", arr);
        if (bad) json_decref(arr);
        if (j && info->index[0] && json_object_set_new(j, "index", json_string(info->index))) bad = 1;
        if (j && info->index_note[0] && json_object_set_new(j, "index_note", cli_json_text(info->index_note))) bad = 1;
        if (j && batch_query &&
            (json_object_set_new(j, "query", json_integer((json_int_t)batch_no)) ||
             json_object_set_new(j, "text", cli_json_text(batch_query))))
            bad = 1;
        char *text = j && !bad ? json_dumps(j, (batch_query ? JSON_COMPACT : JSON_INDENT(2)) | JSON_REAL_PRECISION(7))
                               : NULL;
        if (modattn_json_take_failure() != 0 || !text) {
            modattn_json_free(text);
            text = NULL;
            rc = cli_json_fail("search: writing JSON");
        } else {
            puts(text);
            modattn_json_free(text);
        }
        json_decref(j);
        return rc;
    }
    if (batch_query) {
        char qbuf[4 * 512];
        char shown[512];
        snprintf(shown, sizeof shown, "%s", batch_query);
        printf("%s== query %zu: %s\n", batch_no > 1 ? "\n" : "", batch_no, cli_term_text(shown, qbuf, sizeof qbuf));
    }
    if (n == 0) printf(sp->mode == MODATTN_SEARCH_KEYWORD ? "no results: no chunk holds the query's words\n"
                                                         : "no results: the store is empty\n");
    const bool tty = isatty(STDOUT_FILENO);
    for (size_t i = 0; i < n; i++) {
        char pbuf[PATH_MAX], snip[8 * (SNIPPET_BYTES + 16)], loc[96];
        char spath[4 * PATH_MAX];
        const modattn_store_chunk *c = &res[i].chunk;
        if (c->page > 0)
            snprintf(loc, sizeof loc, "page %lld, bytes %lld-%lld", (long long)c->page,
                     (long long)c->start, (long long)c->end);
        else if (c->line > 0)
            snprintf(loc, sizeof loc, "line %lld, bytes %lld-%lld", (long long)c->line,
                     (long long)c->start, (long long)c->end);
        else
            snprintf(loc, sizeof loc, "bytes %lld-%lld", (long long)c->start,
                     (long long)c->end);
        snippet(&res[i], tty, snip, sizeof snip);
        char why[64] = "", vr[16] = "-", kr[16] = "-";
        if (res[i].vector_rank) snprintf(vr, sizeof vr, "#%d", res[i].vector_rank);
        if (res[i].keyword_rank) snprintf(kr, sizeof kr, "#%d", res[i].keyword_rank);
        if (sp->mode == MODATTN_SEARCH_HYBRID) snprintf(why, sizeof why, "  [meaning %s, words %s]", vr, kr);
        printf("%2d. %.4f  %s  (%s)%s\n    %s\n", res[i].rank, (double)res[i].score,
               cli_term_text(cli_rel_path(c->path, pbuf, sizeof pbuf), spath, sizeof spath), loc, why, snip);
    }
    return 0;
}

/* The lines of path ("-": standard input), blank ones left out, into *out (malloc'd strings). */
static int read_queries(const char *path, char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "modattn: search: --queries %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL, **v = NULL;
    size_t cap = 0, nv = 0, vcap = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &cap, f)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (memchr(line, '\0', (size_t)got)) {
            fprintf(stderr, "modattn: search: --queries %s: line %zu holds a NUL byte\n", path, nv + 1);
            rc = 1;
            break;
        }
        size_t sp = strspn(line, " \t");
        if (line[sp] == '\0') continue;
        if (nv == vcap) {
            size_t nc = vcap ? 2 * vcap : 64;
            char **nvv = realloc(v, nc * sizeof *v);
            if (!nvv) {
                rc = 1;
                fprintf(stderr, "modattn: search: out of memory reading --queries\n");
                break;
            }
            v = nvv, vcap = nc;
        }
        if (!(v[nv] = strdup(line))) {
            rc = 1;
            fprintf(stderr, "modattn: search: out of memory reading --queries\n");
            break;
        }
        nv++;
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "modattn: search: --queries %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    free(line);
    if (f != stdin) fclose(f);
    if (!rc && nv == 0) {
        fprintf(stderr, "modattn: search: --queries %s: no query in it\n", path);
        rc = 2;
    }
    if (rc) {
        for (size_t i = 0; i < nv; i++) free(v[i]);
        free(v);
        return rc;
    }
    *out = v;
    *n = nv;
    return 0;
}

int cli_cmd_search(cli_globals *g, int argc, char **argv) {
    if (cli_has_arg(argc, argv, "--mpi")) return cli_cmd_search_mpi(g, argc, argv);
    const char *db = MODATTN_STORE_DEFAULT_PATH, *model_dir = NULL, *queries_file = NULL;
    bool json = false, dashdash = false;
    long long k = 5;
    size_t qlen = 0;
    modattn_search_params sp = {.mode = MODATTN_SEARCH_HYBRID};
    modattn_ann_params annp;
    memset(&annp, 0, sizeof annp);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            const char *v = NULL;
            const char *name = NULL;
            if (strcmp(a, "--") == 0) {
                dashdash = true;
                continue;
            }
            if (cli_is_help(a)) {
                search_usage(stdout);
                return 0;
            }
            if (strcmp(a, "--json") == 0) {
                json = true;
                continue;
            }
            if (strcmp(a, "--exact") == 0) {
                sp.index = MODATTN_SEARCH_INDEX_EXACT;
                continue;
            }
            static const char *const withval[] = {"--db", "--model", "-k", "--k", "--mode", "--rrf-k", "--keyword-weight",
                                                  "--queries", "--ann-params"};
            for (size_t n = 0; n < sizeof withval / sizeof *withval && !name; n++) {
                size_t l = strlen(withval[n]);
                if (strncmp(a, withval[n], l) == 0 && (a[l] == '\0' || a[l] == '=')) {
                    name = withval[n];
                    if (a[l] == '=') v = a + l + 1;
                    else if (i + 1 < argc) v = argv[++i];
                }
            }
            if (!name) {
                fprintf(stderr, "modattn: search: unknown option '%s' (see modattn search --help)\n", a);
                return 2;
            }
            if (!v) {
                fprintf(stderr, "modattn: search: %s needs a value\n", name);
                return 2;
            }
            if (strcmp(name, "--db") == 0) db = v;
            else if (strcmp(name, "--queries") == 0) queries_file = v;
            else if (strcmp(name, "--ann-params") == 0) {
                if (modattn_ann_params_parse(v, &annp) != 0) {
                    fprintf(stderr, "modattn: search: --ann-params: %s\n", modattn_last_error());
                    return 2;
                }
                sp.ann = &annp;
            }
            else if (strcmp(name, "--model") == 0) model_dir = v;
            else if (strcmp(name, "--mode") == 0) {
                if (strcmp(v, "hybrid") == 0) sp.mode = MODATTN_SEARCH_HYBRID;
                else if (strcmp(v, "vector") == 0) sp.mode = MODATTN_SEARCH_VECTOR;
                else if (strcmp(v, "keyword") == 0) sp.mode = MODATTN_SEARCH_KEYWORD;
                else {
                    fprintf(stderr, "modattn: search: --mode: '%s' is not hybrid, vector or keyword\n", v);
                    return 2;
                }
            } else if (strcmp(name, "--rrf-k") == 0) {
                if (cli_parse_double("--rrf-k", v, 0, 1e6, true, &sp.rrf_k) != 0) return 2;
            } else if (strcmp(name, "--keyword-weight") == 0) {
                if (cli_parse_double("--keyword-weight", v, 0, 1e6, true, &sp.keyword_weight) != 0) return 2;
            } else {
                char *end;
                errno = 0;
                k = strtoll(v, &end, 10);
                if (*v == '\0' || *end || errno || k < 1 || k > 10000) {
                    fprintf(stderr, "modattn: search: -k: '%s' is not a count in [1, 10000]\n", v);
                    return 2;
                }
            }
            continue;
        }
        qlen += strlen(a) + 1;
    }
    if (queries_file && qlen) {
        fprintf(stderr, "modattn: search: give QUERY words or --queries FILE, not both\n");
        return 2;
    }
    if (qlen == 0 && !queries_file) {
        fprintf(stderr, "modattn: search: no QUERY given\n\n");
        search_usage(stderr);
        return 2;
    }
    /* the query: every non-option argument, joined by spaces */
    char *query = malloc(qlen + 1);
    if (!query) {
        fprintf(stderr, "modattn: search: out of memory\n");
        return 1;
    }
    query[0] = '\0';
    dashdash = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            if (strcmp(a, "--") == 0) dashdash = true;
            else if (strcmp(a, "--json") != 0 && strcmp(a, "--exact") != 0 && !strchr(a, '=')) i++; /* skip its value */
            continue;
        }
        if (query[0]) strcat(query, " ");
        strcat(query, a);
    }

    char **qs = &query;
    size_t nq = 1;
    if (queries_file) {
        free(query);
        query = NULL;
        int qrc = read_queries(queries_file, &qs, &nq);
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
    model_dir = cli_model_dir(model_dir, mbuf, sizeof mbuf);
    /* a few queries: no packed weights (faster start, ~90 MB less); many: the fast GEMMs pay */
    g->few_inputs = nq <= 8;
    /* keywords alone need the model only to check the store is its own (and its tokenizer is
     * light); it is loaded the same way */
    if ((st = cli_load_model(g, ctx, model_dir, &model))) {
        rc = cli_fail("loading the model", st);
        goto out;
    }
    modattn_search_info info;
    sp.k = (size_t)k;
    if (!queries_file)
        st = modattn_search_with(store, model, query, &sp, modattn_ctx_exec(ctx), &res[0], &nres[0], &info, &notes[0]);
    else
        st = modattn_search_batch(store, model, (const char *const *)qs, nq, &sp, modattn_ctx_exec(ctx), res, nres,
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
        rc = print_results(&sp, &info, res[i], nres[i], json, i + 1, queries_file ? qs[i] : NULL);
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
        for (size_t i = 0; i < nq; i++) free(qs[i]);
        free(qs);
    }
    free(query);
    return rc;
}
