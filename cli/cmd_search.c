/* cli/cmd_search.c — `modattn search`: the chunks of a store closest in meaning to a query.
 * Front end only: options and printing; the work is modattn_search (pipeline/search.c). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"

#define SNIPPET_BYTES 240

static void search_usage(FILE *f) {
    fprintf(f,
            "usage: modattn search [--db FILE] [--model DIR] [-k N] [--json] QUERY...\n\n"
            "Embed QUERY (the words joined by spaces) and print the k stored chunks with the\n"
            "highest cosine similarity, best first: rank, score, path, location (byte range in\n"
            "the document's text, and its line, or its page for a PDF) and a snippet. Exact:\n"
            "every stored vector is compared (SIMD, threads for large stores).\n\n"
            "options:\n"
            "  --db FILE     the store made by `modattn index` (default ./" MODATTN_STORE_DEFAULT_PATH ")\n"
            "  --model DIR   model directory, as for `modattn index` (default: $MODATTN_MODEL,\n"
            "                else <executable dir>/../.models/all-MiniLM-L6-v2, else\n"
            "                ./.models/all-MiniLM-L6-v2); it must be the store's model\n"
            "  -k N          number of results (default 5)\n"
            "  --json        {\"results\": [{\"rank\", \"score\", \"path\", \"start\", \"end\", \"line\",\n"
            "                \"page\", \"text\"}, ...]} with each chunk's whole text\n"
            "  -h, --help    this help\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n");
}

/* The chunk's text on one line, whitespace collapsed, cut at a character boundary. */
static void snippet(const char *t, char *out, size_t cap) {
    size_t o = 0;
    bool space = false;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        if (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == '\f' || *p == '\v') {
            space = o > 0;
            continue;
        }
        /* cut before a character, never inside one; cap >= SNIPPET_BYTES + 16 */
        if ((*p & 0xc0) != 0x80 && (o >= SNIPPET_BYTES || o + 8 >= cap)) {
            memcpy(out + o, "\xe2\x80\xa6", 3); /* ... */
            o += 3;
            break;
        }
        if (space) out[o++] = ' ';
        space = false;
        out[o++] = (char)*p;
    }
    out[o] = '\0';
}

int cli_cmd_search(cli_globals *g, int argc, char **argv) {
    const char *db = MODATTN_STORE_DEFAULT_PATH, *model_dir = NULL;
    bool json = false, dashdash = false;
    long long k = 5;
    size_t qlen = 0;
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
            static const char *const withval[] = {"--db", "--model", "-k", "--k"};
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
            else if (strcmp(name, "--model") == 0) model_dir = v;
            else {
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
    if (qlen == 0) {
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
            else if (strcmp(a, "--json") != 0 && !strchr(a, '=')) i++; /* skip its value */
            continue;
        }
        if (query[0]) strcat(query, " ");
        strcat(query, a);
    }

    modattn_store *store = NULL;
    modattn_model *model = NULL;
    modattn_ctx *ctx = NULL;
    int st = modattn_store_open(db, MODATTN_STORE_READONLY, &store);
    if (st) {
        free(query);
        return cli_fail("opening the store", st);
    }
    if (modattn_store_note(store)) fprintf(stderr, "modattn: note: %s\n", modattn_store_note(store));
    if (cli_open_ctx(g, &ctx)) {
        modattn_store_close(store);
        free(query);
        return 1;
    }
    char mbuf[PATH_MAX + 64];
    model_dir = cli_model_dir(model_dir, mbuf, sizeof mbuf);
    g->few_inputs = true; /* one query: no packed weights (faster start, ~90 MB less) */
    if ((st = cli_load_model(g, ctx, model_dir, &model))) {
        modattn_store_close(store);
        free(query);
        return cli_fail("loading the model", st);
    }
    modattn_search_result *res = NULL;
    size_t n = 0;
    int rc = 0;
    modattn_search_info info;
    st = modattn_search_ex(store, model, query, (size_t)k, modattn_ctx_exec(ctx), &res, &n, &info);
    char nbuf[4 * sizeof info.note];
    if (!st && info.note[0]) /* said once per search: correct, but slower */
        fprintf(stderr, "modattn: note: searching the store itself (slower): %s; `modattn index` rewrites the vector file\n",
                cli_term_text(info.note, nbuf, sizeof nbuf));
    if (st) {
        rc = cli_fail("search", st);
    } else if (json) {
        json_t *arr = json_array();
        int bad = !arr;
        for (size_t i = 0; i < n && !bad; i++) {
            char pbuf[PATH_MAX];
            const modattn_store_chunk *c = &res[i].chunk;
            json_t *o = json_pack("{s:i, s:f}", "rank", res[i].rank, "score", (double)res[i].score);
            if (!o || cli_json_set_path(o, "path", cli_rel_path(c->path, pbuf, sizeof pbuf)) ||
                json_object_set_new(o, "start", json_integer((json_int_t)c->start)) ||
                json_object_set_new(o, "end", json_integer((json_int_t)c->end)) ||
                json_object_set_new(o, "line", json_integer((json_int_t)c->line)) ||
                json_object_set_new(o, "page", json_integer((json_int_t)c->page)) ||
                json_object_set_new(o, "text", cli_json_text(c->text)) || json_array_append_new(arr, o))
                bad = 1;
        }
        json_t *j = bad ? NULL : json_pack("{s:o}", "results", arr);
        if (bad) json_decref(arr);
        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(7)) : NULL;
        if (modattn_json_take_failure() != 0 || !text) {
            modattn_json_free(text);
            text = NULL;
            rc = cli_json_fail("search: writing JSON");
        } else {
            puts(text);
            modattn_json_free(text);
        }
        json_decref(j);
    } else {
        if (n == 0) printf("no results: the store is empty\n");
        for (size_t i = 0; i < n; i++) {
            char pbuf[PATH_MAX], snip[SNIPPET_BYTES + 16], loc[96], safe[4 * (SNIPPET_BYTES + 16)];
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
            snippet(c->text, snip, sizeof snip);
            printf("%2d. %.4f  %s  (%s)\n    %s\n", res[i].rank, (double)res[i].score,
                   cli_term_text(cli_rel_path(c->path, pbuf, sizeof pbuf), spath, sizeof spath), loc,
                   cli_term_text(snip, safe, sizeof safe));
        }
    }
    if (cli_stdout_check()) rc = 1;
    modattn_search_results_free(res, n);
    modattn_model_free(model);
    modattn_store_close(store);
    free(query);
    return rc;
}
