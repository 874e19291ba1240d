/* cli/cli_search_args.c — the options and QUERY words of `modattn search`, read once for the plain
 * command (cli/cmd_search.c) and for `search --mpi` (cli/cmd_mpi_search.c), so that both take the
 * same options with the same errors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "modattn/ann.h"
#include "modattn/search.h"

int cli_search_parse(int argc, char **argv, bool say, cli_search_args *a) {
    memset(a, 0, sizeof *a);
    a->db = MODATTN_STORE_DEFAULT_PATH;
    a->k = MODATTN_SEARCH_DEFAULT_K; /* as the server's "k" and Python's Store.search(k=) */
    a->sp.mode = MODATTN_SEARCH_HYBRID;
    bool dashdash = false;
    size_t qlen = 0;
    /* the QUERY words, in order (argv's; joined at the end) */
    const char **words = calloc((size_t)argc + 1, sizeof *words);
    size_t nwords = 0;
    if (!words) {
        if (say) fprintf(stderr, "modattn: search: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *arg = argv[i];
        if (dashdash || arg[0] != '-' || arg[1] == '\0') {
            words[nwords++] = arg;
            qlen += strlen(arg) + 1;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            dashdash = true;
            continue;
        }
        if (cli_is_help(arg)) {
            rc = -1;
            break;
        }
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
            continue;
        }
        if (strcmp(arg, "--exact") == 0) {
            a->sp.index = MODATTN_SEARCH_INDEX_EXACT;
            continue;
        }
        if (strcmp(arg, "--ann") == 0) {
            a->sp.index = MODATTN_SEARCH_INDEX_ANN;
            continue;
        }
        {
            int pr = cli_prompt_option("search", argc, argv, &i, false, say, &a->eo);
            if (pr == 0) continue;
            if (pr > 0) {
                rc = pr;
                break;
            }
        }
        static const char *const withval[] = {"--db", "--model", "-k", "--k", "--mode", "--rrf-k", "--keyword-weight",
                                              "--queries", "--ann-params", "--sparse-weight", "--sparse"};
        const char *v = NULL, *name = NULL;
        for (size_t n = 0; n < sizeof withval / sizeof *withval && !name; n++) {
            size_t l = strlen(withval[n]);
            if (strncmp(arg, withval[n], l) == 0 && (arg[l] == '\0' || arg[l] == '=')) {
                name = withval[n];
                if (arg[l] == '=') v = arg + l + 1;
                else if (i + 1 < argc) v = argv[++i];
            }
        }
        if (!name) {
            if (say) fprintf(stderr, "modattn: search: unknown option '%s' (see modattn search --help)\n", arg);
            rc = 2;
        } else if (!v) {
            if (say) fprintf(stderr, "modattn: search: %s needs a value\n", name);
            rc = 2;
        } else if (strcmp(name, "--db") == 0) {
            a->db = v;
        } else if (strcmp(name, "--queries") == 0) {
            a->queries_file = v;
        } else if (strcmp(name, "--model") == 0) {
            a->model_dir = v;
        } else if (strcmp(name, "--ann-params") == 0) {
            if (modattn_ann_params_parse(v, &a->annp) != 0) {
                if (say) fprintf(stderr, "modattn: search: --ann-params: %s\n", modattn_last_error());
                rc = 2;
            }
            a->sp.ann = &a->annp;
        } else if (strcmp(name, "--mode") == 0) {
            if (strcmp(v, "hybrid") == 0) a->sp.mode = MODATTN_SEARCH_HYBRID;
            else if (strcmp(v, "vector") == 0) a->sp.mode = MODATTN_SEARCH_VECTOR;
            else if (strcmp(v, "keyword") == 0) a->sp.mode = MODATTN_SEARCH_KEYWORD;
            else if (strcmp(v, "sparse") == 0) a->sp.mode = MODATTN_SEARCH_SPARSE;
            else {
                if (say) fprintf(stderr, "modattn: search: --mode: '%s' is not hybrid, vector, keyword or sparse\n", v);
                rc = 2;
            }
        } else if (strcmp(name, "--sparse") == 0) {
            a->sparse_dir = v;
        } else if (strcmp(name, "--sparse-weight") == 0) {
            if (cli_parse_double_say("--sparse-weight", v, 0, 1e6, true, say, &a->sp.sparse_weight) != 0) rc = 2;
        } else if (strcmp(name, "--rrf-k") == 0) {
            if (cli_parse_double_say("--rrf-k", v, 0, 1e6, true, say, &a->sp.rrf_k) != 0) rc = 2;
        } else if (strcmp(name, "--keyword-weight") == 0) {
            if (cli_parse_double_say("--keyword-weight", v, 0, 1e6, true, say, &a->sp.keyword_weight) != 0) rc = 2;
        } else {
            char *end;
            errno = 0;
            a->k = strtoll(v, &end, 10);
            if (*v == '\0' || *end || errno || a->k < 1 || a->k > 10000) {
                if (say) fprintf(stderr, "modattn: search: -k: '%s' is not a count in [1, 10000]\n", v);
                rc = 2;
            }
        }
    }
    if (!rc && a->queries_file && qlen) {
        if (say) fprintf(stderr, "modattn: search: give QUERY words or --queries FILE, not both\n");
        rc = 2;
    } else if (!rc && qlen == 0 && !a->queries_file) {
        if (say) fprintf(stderr, "modattn: search: no QUERY given\n");
        rc = 3;
    }
    if (!rc && qlen) {
        /* the query: every word, joined by spaces */
        if (!(a->query = malloc(qlen + 1))) {
            if (say) fprintf(stderr, "modattn: search: out of memory\n");
            rc = 1;
        } else {
            size_t at = 0;
            for (size_t w = 0; w < nwords; w++) {
                const size_t l = strlen(words[w]);
                if (at) a->query[at++] = ' ';
                memcpy(a->query + at, words[w], l);
                at += l;
            }
            a->query[at] = '\0';
        }
    }
    free(words);
    a->sp.k = (size_t)a->k;
    a->sp.embed = &a->eo;
    return rc;
}

void cli_search_args_free(cli_search_args *a) {
    if (!a) return;
    free(a->query);
    a->query = NULL;
}
