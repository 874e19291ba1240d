/* cli/cmd_rerank.c — `modattn rerank`: a query and passages scored together by a cross-encoder
 * (modattn/rerank.h), printed best first; and the loading and limits `search --rerank` shares. Front
 * end only: options, reading passages, sorting, printing. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "modattn/rerank.h"

static void rerank_usage(FILE *f) {
    fprintf(f,
            "usage: modattn rerank --model DIR [--json] [--raw] [--top N] [--batch-tokens N]\n"
            "                      QUERY [PASSAGE ... | --passages FILE]\n\n"
            "Score each passage against the query with a cross-encoder (a Hugging Face\n"
            "*ForSequenceClassification directory, e.g. cross-encoder/ms-marco-MiniLM-L6-v2), which\n"
            "reads the query and the passage together, and print them best first:\n"
            "  rank. score  [index]  passage\n"
            "A model with several labels (id2label) prints every label's score, in input order.\n"
            "Scores are what sentence-transformers' CrossEncoder.predict gives: sigmoid for one label\n"
            "(unless config.json names another activation), the logits for more.\n\n"
            "options:\n"
            "  --model DIR        the cross-encoder's directory, or its NAME / ORG/NAME as\n"
            "                     `modattn models` finds it (required: no default reranker)\n"
            "  --passages FILE    the passages, one per line (- for stdin), blank lines skipped\n"
            "  --json             one JSON object: {\"model\", \"query\", \"results\": [{\"index\",\n"
            "                     \"score\" (or \"scores\": {label: score} and \"label\"), \"tokens\",\n"
            "                     \"truncated\", \"text\"}]}\n"
            "  --raw              the logits, no activation\n"
            "  --top N            print only the N best (default: all)\n"
            "  --batch-tokens N   padded tokens per batch (default %d)\n"
            "  -h, --help         this help\n"
            "limits (exit status 2): an empty query, no passage, more than %d passages, a query or\n"
            "passage over %d bytes (pairs are cut to the model's length anyway, the longer side first).\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n",
            MODATTN_MODEL_DEFAULT_BATCH_TOKENS, CLI_RERANK_MAX_TEXTS, CLI_RERANK_MAX_BYTES);
}

int cli_load_reranker(cli_globals *g, modattn_ctx *ctx, const char *dir, modattn_reranker **out) {
    char buf[PATH_MAX + 64];
    const char *d = cli_model_resolve(dir, buf, sizeof buf);
    modattn_model_options o;
    memset(&o, 0, sizeof o);
    o.device = g->device && strcmp(g->device, "auto") == 0 ? "cpu" : g->device;
    o.pool = g->pool;
    o.host_fallback = g->host_fallback;
    o.precision = g->precision;
    return modattn_reranker_load(ctx, d, &o, out);
}

typedef struct scored {
    size_t index;
    float score;
} scored;

static int by_score(const void *x, const void *y) {
    const scored *a = x, *b = y;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

int cli_rerank_order(const float *scores, size_t n, size_t *order) {
    scored *s = malloc((n ? n : 1) * sizeof *s);
    if (!s) return 1;
    for (size_t i = 0; i < n; i++) s[i].index = i, s[i].score = scores[i];
    qsort(s, n, sizeof *s, by_score);
    for (size_t i = 0; i < n; i++) order[i] = s[i].index;
    free(s);
    return 0;
}

/* passages from a file, one a line, blank ones skipped */
static int read_passages(const char *path, char ***out, size_t *n) {
    int rc = cli_read_queries(path, out, n); /* the same rules: bounded lines, blank ones left out */
    return rc;
}

static void print_text(const modattn_reranker_info *in, const char *const *p, const float *sc, const int32_t *ntok,
                       const bool *tr, const size_t *order, size_t n, size_t top) {
    const size_t L = in->num_labels;
    for (size_t r = 0; r < n && r < top; r++) {
        size_t i = L == 1 ? order[r] : r;
        char shown[4 * 200 + 8], cut[201];
        snprintf(cut, sizeof cut, "%s", p[i]);
        cli_term_text(cut, shown, sizeof shown);
        if (L == 1) {
            printf("%2zu. %.6f  [%zu]%s  %s\n", r + 1, (double)sc[i], i, tr[i] ? " (cut)" : "", shown);
        } else {
            printf("[%zu]", i);
            for (size_t l = 0; l < L; l++) printf(" %s=%.6f", in->labels[l], (double)sc[i * L + l]);
            printf("%s  %s\n", tr[i] ? " (cut)" : "", shown);
        }
        (void)ntok;
    }
}

static int print_json(const modattn_reranker_info *in, const char *query, const char *const *p, const float *sc,
                      const int32_t *ntok, const bool *tr, const size_t *order, size_t n, size_t top, bool raw) {
    const size_t L = in->num_labels;
    json_t *arr = json_array();
    int bad = !arr;
    for (size_t r = 0; r < n && r < top && !bad; r++) {
        size_t i = L == 1 ? order[r] : r;
        json_t *o = json_pack("{s:I, s:I, s:b}", "index", (json_int_t)i, "tokens", (json_int_t)ntok[i], "truncated", tr[i]);
        if (!o) {
            bad = 1;
            break;
        }
        if (L == 1) {
            bad |= json_object_set_new(o, "score", json_real((double)sc[i]));
        } else {
            json_t *s = json_object();
            size_t best = 0;
            for (size_t l = 0; s && l < L; l++) {
                bad |= json_object_set_new(s, in->labels[l], json_real((double)sc[i * L + l]));
                if (sc[i * L + l] > sc[i * L + best]) best = l;
            }
            bad |= !s || json_object_set_new(o, "scores", s) || json_object_set_new(o, "label", json_string(in->labels[best]));
        }
        bad |= json_object_set_new(o, "text", cli_json_text(p[i])) || json_array_append_new(arr, o);
    }
    json_t *j = bad ? NULL : json_pack("{s:s, s:o, s:s, s:b, s:o}", "model", in->name, "query", cli_json_text(query),
                                       "activation", raw ? "none" : in->activation, "raw", raw, "results", arr);
    if (!j) {
        if (!bad) arr = NULL;
        json_decref(arr);
        return cli_json_fail("rerank: writing JSON");
    }
    return cli_print_json(j);
}

int cli_cmd_rerank(cli_globals *g, int argc, char **argv) {
    const char *model_dir = NULL, *passages_file = NULL, *query = NULL;
    bool json = false, raw = false, dashdash = false;
    long long batch_tokens = 0, top = 0;
    char **texts = calloc((size_t)argc + 1, sizeof *texts), **fp = NULL;
    size_t ntexts = 0, nfp = 0;
    int rc = 0;
    if (!texts) {
        fprintf(stderr, "modattn: rerank: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            bool missing = false;
            const char *v;
            if (strcmp(a, "--") == 0) dashdash = true;
            else if (cli_is_help(a)) {
                rerank_usage(stdout);
                free(texts);
                return 0;
            } else if (strcmp(a, "--json") == 0) json = true;
            else if (strcmp(a, "--raw") == 0) raw = true;
            else if ((v = cli_opt_value(argc, argv, &i, "--model", &missing)) || missing) {
                if (missing) goto missing;
                model_dir = v;
            } else if ((v = cli_opt_value(argc, argv, &i, "--passages", &missing)) || missing) {
                if (missing) goto missing;
                passages_file = v;
            } else if ((v = cli_opt_value(argc, argv, &i, "--top", &missing)) || missing) {
                if (missing) goto missing;
                if (cli_parse_ll("--top", v, 1, LLONG_MAX, &top)) {
                    free(texts);
                    return 2;
                }
            } else if ((v = cli_opt_value(argc, argv, &i, "--batch-tokens", &missing)) || missing) {
                if (missing) goto missing;
                if (cli_parse_ll("--batch-tokens", v, 1, 1 << 22, &batch_tokens)) {
                    free(texts);
                    return 2;
                }
            } else {
                fprintf(stderr, "modattn: rerank: unknown option '%s' (see modattn rerank --help)\n", a);
                free(texts);
                return 2;
            }
            continue;
        }
        if (!query) query = a;
        else texts[ntexts++] = argv[i];
    }
    if (!model_dir) {
        fprintf(stderr, "modattn: rerank: --model DIR is required (a cross-encoder's directory)\n");
        free(texts);
        return 2;
    }
    if (!query || !*query) {
        fprintf(stderr, "modattn: rerank: the query is empty\n");
        free(texts);
        return 2;
    }
    if (passages_file && ntexts) {
        fprintf(stderr, "modattn: rerank: give PASSAGE arguments or --passages FILE, not both\n");
        free(texts);
        return 2;
    }
    if (passages_file) {
        if ((rc = read_passages(passages_file, &fp, &nfp))) {
            free(texts);
            return rc;
        }
    }
    const char *const *p = passages_file ? (const char *const *)fp : (const char *const *)texts;
    size_t n = passages_file ? nfp : ntexts;
    modattn_ctx *ctx = NULL;
    modattn_reranker *r = NULL;
    float *sc = NULL;
    int32_t *ntok = NULL;
    bool *tr = NULL;
    size_t *order = NULL;
    const char **qv = NULL;
    if (n == 0) {
        fprintf(stderr, "modattn: rerank: no passage to score\n");
        rc = 2;
        goto out;
    }
    if (n > CLI_RERANK_MAX_TEXTS) {
        fprintf(stderr, "modattn: rerank: %zu passages is over the limit of %d a call\n", n, CLI_RERANK_MAX_TEXTS);
        rc = 2;
        goto out;
    }
    if (strlen(query) > CLI_RERANK_MAX_BYTES) {
        fprintf(stderr, "modattn: rerank: the query is over %d bytes\n", CLI_RERANK_MAX_BYTES);
        rc = 2;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (strlen(p[i]) > CLI_RERANK_MAX_BYTES) {
            fprintf(stderr, "modattn: rerank: passage %zu is over %d bytes\n", i, CLI_RERANK_MAX_BYTES);
            rc = 2;
            goto out;
        }
    if (cli_open_ctx(g, &ctx)) {
        rc = 1;
        goto out;
    }
    int st = cli_load_reranker(g, ctx, model_dir, &r);
    if (st) {
        rc = cli_fail("loading the reranker", st);
        goto out;
    }
    if (batch_tokens && (st = modattn_model_set_batch_tokens(modattn_reranker_model(r), (size_t)batch_tokens))) {
        rc = cli_fail("--batch-tokens", st);
        goto out;
    }
    const modattn_reranker_info *in = modattn_reranker_get_info(r);
    const size_t L = in->num_labels;
    sc = malloc(n * L * sizeof *sc), ntok = malloc(n * sizeof *ntok), tr = malloc(n * sizeof *tr);
    order = malloc(n * sizeof *order), qv = malloc(n * sizeof *qv);
    if (!sc || !ntok || !tr || !order || !qv) {
        fprintf(stderr, "modattn: rerank: out of memory\n");
        rc = 1;
        goto out;
    }
    for (size_t i = 0; i < n; i++) qv[i] = query;
    if ((st = modattn_reranker_score(r, NULL, qv, NULL, p, NULL, n, raw ? MODATTN_RERANK_RAW : 0, sc, ntok, tr))) {
        rc = cli_fail("rerank", st);
        goto out;
    }
    if (L == 1 && cli_rerank_order(sc, n, order)) {
        fprintf(stderr, "modattn: rerank: out of memory\n");
        rc = 1;
        goto out;
    }
    size_t k = top ? (size_t)top : n;
    if (json) rc = print_json(in, query, p, sc, ntok, tr, order, n, k, raw);
    else print_text(in, p, sc, ntok, tr, order, n, k);
    if (!rc && cli_stdout_check()) rc = 1;
out:
    modattn_reranker_free(r);
    free(sc), free(ntok), free(tr), free(order), free(qv);
    for (size_t i = 0; i < nfp; i++) modattn_free(fp[i]);
    modattn_free(fp);
    free(texts);
    return rc;
missing:
    fprintf(stderr, "modattn: rerank: %s needs a value\n", argv[argc - 1]);
    free(texts);
    return 2;
}
