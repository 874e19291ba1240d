/* cli/cmd_embed.c — `modattn embed`: texts in, one JSON line per text out, in input order.
 * Front end only: argument parsing, reading stdin in chunks, printing; the model does the rest. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/model.h"
#include "modattn/sparse.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"

/* Texts read from stdin are embedded this many at a time (bounded memory on long streams). */
#define EMBED_CHUNK_TEXTS 2048
#define EMBED_CHUNK_BYTES ((size_t)8 << 20)

static void embed_usage(FILE *f) {
    fprintf(f,
            "usage: modattn embed [--model DIR] [--jsonl] [--batch-tokens N]\n"
            "                     [--prompt-name NAME | --prompt TEXT] [--dimensions N] [TEXT ... | -]\n"
            "       modattn embed --sparse --model DIR [--sparse-tokens] [--top-k N] [--threshold X]\n"
            "                     [--jsonl] [--batch-tokens N] [TEXT ... | -]\n\n"
            "Embed texts with a sentence-transformers model and print one JSON line per text,\n"
            "in input order:\n"
            "  {\"index\": i, \"tokens\": n, \"embedding\": [...]}\n"
            "where tokens counts the word pieces fed to the model ([CLS] and [SEP] included,\n"
            "after truncation to the model's max_seq_length, a prompt's word pieces included).\n\n"
            "options:\n"
            "  --model DIR        model directory (default: $MODATTN_MODEL, else all-MiniLM-L6-v2\n"
            "                     in <executable dir>/../.models, <executable dir>/../share/\n"
            "                     modattn/models (make install), ~/.local/share/modattn/models,\n"
            "                     ./.models)\n"
            "  --jsonl            with -, each stdin line is a JSON string (texts with newlines)\n"
            "  --batch-tokens N   padded tokens per batch (default %d)\n"
            "  --prompt-name NAME put the model's prompt NAME (config_sentence_transformers.json\n"
            "                     \"prompts\") before each text, as sentence-transformers'\n"
            "                     encode(prompt_name=NAME); default: its default_prompt_name's\n"
            "  --prompt TEXT      put TEXT before each text ('': no prompt)\n"
            "  --dimensions N     the first N dimensions of each vector (Matryoshka), normalised\n"
            "                     again when the model normalises; 1 to the model's dimension;\n"
            "                     default: the model's truncate_dim, else all\n"
            "  --sparse           a SPLADE vector per text instead (a *ForMaskedLM directory, e.g.\n"
            "                     naver/splade-v3, or sentence-transformers' SparseEncoder layout):\n"
            "                     {\"index\": i, \"tokens\": n, \"sparse\": {\"token_id\": weight, ...}}\n"
            "                     with the non-zero weights, ids ascending, as SparseEncoder.encode\n"
            "  --sparse-tokens    with --sparse, also \"sparse_tokens\": {\"token_id\": \"token\", ...}\n"
            "  --top-k N          with --sparse, keep the N largest weights (max_active_dims)\n"
            "  --threshold X      with --sparse, drop weights below X (X >= 0)\n"
            "  -                  read texts from stdin, one per line\n"
            "  -h, --help         this help\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n",
            MODATTN_MODEL_DEFAULT_BATCH_TOKENS);
}

static void print_result(size_t index, int32_t tokens, const float *e, size_t dim) {
    printf("{\"index\": %zu, \"tokens\": %d, \"embedding\": [", index, (int)tokens);
    for (size_t k = 0; k < dim; k++) printf(k ? ", %.9g" : "%.9g", (double)e[k]);
    fputs("]}\n", stdout);
}

typedef struct batch {
    char **texts;
    size_t *lens;
    size_t n, bytes;
    float *out;
    int32_t *ntok;
} batch;

/* embed --sparse */
typedef struct sparse_run {
    modattn_sparse_encoder *e;
    modattn_sparse_options opt;
    bool tokens; /* --sparse-tokens */
} sparse_run;

int cli_load_sparse(cli_globals *g, modattn_ctx *ctx, const char *dir, modattn_sparse_encoder **out) {
    char buf[PATH_MAX + 64];
    const char *d = cli_model_resolve(dir, buf, sizeof buf);
    modattn_model_options o;
    memset(&o, 0, sizeof o);
    o.device = g->device && strcmp(g->device, "auto") == 0 ? "cpu" : g->device;
    o.pool = g->pool;
    o.host_fallback = g->host_fallback;
    o.precision = g->precision;
    return modattn_sparse_load(ctx, d, &o, out);
}

static int print_sparse(const sparse_run *sp, size_t index, int32_t tokens, const modattn_sparse_vec *v) {
    json_t *w = json_object(), *t = sp->tokens ? json_object() : NULL;
    int bad = !w || (sp->tokens && !t);
    const modattn_tokenizer *tok = modattn_model_tokenizer(modattn_sparse_model(sp->e));
    for (size_t k = 0; k < v->n && !bad; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", (int)v->ids[k]);
        bad |= json_object_set_new(w, key, json_real((double)v->weights[k]));
        if (t) {
            const char *s = modattn_tokenizer_token(tok, v->ids[k]);
            bad |= json_object_set_new(t, key, cli_json_text(s ? s : ""));
        }
    }
    json_t *j = bad ? NULL : json_pack("{s:I, s:I, s:o}", "index", (json_int_t)index, "tokens", (json_int_t)tokens, "sparse", w);
    if (j && t) bad |= json_object_set_new(j, "sparse_tokens", t);
    else json_decref(t);
    if (!j) {
        if (!bad) w = NULL;
        json_decref(w);
        return cli_json_fail("embed: writing JSON");
    }
    if (bad) {
        json_decref(j);
        return cli_json_fail("embed: writing JSON");
    }
    char *s = json_dumps(j, JSON_REAL_PRECISION(9));
    json_decref(j);
    if (modattn__json_take_failure() != 0 || !s) {
        modattn__json_free(s);
        return cli_json_fail("embed: writing JSON");
    }
    puts(s);
    modattn__json_free(s);
    return 0;
}

static int sparse_texts(const sparse_run *sp, const char *const *texts, const size_t *lens, size_t n, size_t first) {
    modattn_sparse_vec *v = calloc(n ? n : 1, sizeof *v);
    int32_t *ntok = malloc((n ? n : 1) * sizeof *ntok);
    int rc = 0, st;
    if (!v || !ntok) {
        fprintf(stderr, "modattn: embed: out of memory\n");
        rc = 1;
    } else if ((st = modattn_sparse_encode(sp->e, NULL, texts, lens, n, &sp->opt, v, ntok))) {
        rc = cli_fail("embed --sparse", st);
    } else {
        for (size_t i = 0; i < n && !rc; i++) rc = print_sparse(sp, first + i, ntok[i], &v[i]);
        if (!rc && cli_stdout_check()) rc = 1;
        modattn_sparse_vec_free(v, n);
    }
    free(v);
    free(ntok);
    return rc;
}

/* Embeds the texts held, prints them with indices from `first`, and empties the batch. */
static int flush(modattn_model *m, const sparse_run *sp, const modattn_embed_options *eo, batch *b, size_t first) {
    if (b->n == 0) return 0;
    if (sp) {
        int rc = sparse_texts(sp, (const char *const *)b->texts, b->lens, b->n, first);
        for (size_t i = 0; i < b->n; i++) modattn_free(b->texts[i]);
        b->n = 0;
        b->bytes = 0;
        return rc;
    }
    size_t dim = modattn_model_embed_dim(m, eo);
    int st = modattn_model_embed_opt(m, NULL, eo, (const char *const *)b->texts, b->lens, b->n, b->out, b->ntok);
    if (st) return cli_fail("embed", st);
    for (size_t i = 0; i < b->n; i++) print_result(first + i, b->ntok[i], b->out + i * dim, dim);
    for (size_t i = 0; i < b->n; i++) modattn_free(b->texts[i]);
    b->n = 0;
    b->bytes = 0;
    if (cli_stdout_check()) return 1;
    return 0;
}

/* One line of stdin into an owned text: plain (the line without its newline) or a JSON string. */
static int line_text(const char *line, size_t len, bool jsonl, size_t lineno, char **out,
                     size_t *out_len) {
    if (len && line[len - 1] == '\n') len--;
    if (len && line[len - 1] == '\r') len--;
    if (!jsonl) {
        char *t = modattn__malloc(len + 1, MODATTN_MEM_OTHER);
        if (!t) {
            fprintf(stderr, "modattn: embed: stdin line %zu: %s\n", lineno, modattn_last_error());
            return 1;
        }
        memcpy(t, line, len);
        t[len] = '\0';
        *out = t;
        *out_len = len;
        return 0;
    }
    json_error_t err;
    json_t *j = NULL;
    int st = modattn__json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &j, &err);
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) {
        fprintf(stderr, "modattn: embed: stdin line %zu: %s\n", lineno, modattn_last_error());
        return 1;
    }
    if (!j || !json_is_string(j)) {
        fprintf(stderr, "modattn: embed: stdin line %zu: expected a JSON string%s%s\n", lineno,
                j ? "" : ": ", j ? "" : err.text);
        json_decref(j);
        return 1;
    }
    size_t n = json_string_length(j);
    char *t = modattn__malloc(n + 1, MODATTN_MEM_OTHER);
    if (!t) {
        fprintf(stderr, "modattn: embed: stdin line %zu: %s\n", lineno, modattn_last_error());
        json_decref(j);
        return 1;
    }
    memcpy(t, json_string_value(j), n);
    t[n] = '\0';
    json_decref(j);
    *out = t;
    *out_len = n;
    return 0;
}

static int embed_stdin(modattn_model *m, const sparse_run *sp, const modattn_embed_options *eo, bool jsonl) {
    batch b = {0};
    size_t dim = sp ? 1 : modattn_model_embed_dim(m, eo);
    b.texts = calloc(EMBED_CHUNK_TEXTS, sizeof *b.texts);
    b.lens = calloc(EMBED_CHUNK_TEXTS, sizeof *b.lens);
    b.out = malloc(EMBED_CHUNK_TEXTS * dim * sizeof(float));
    b.ntok = malloc(EMBED_CHUNK_TEXTS * sizeof(int32_t));
    char *line = NULL;
    size_t cap = 0, index = 0, lineno = 0;
    int rc = 0;
    if (!b.texts || !b.lens || !b.out || !b.ntok) {
        fprintf(stderr, "modattn: embed: out of memory\n");
        rc = 1;
        goto done;
    }
    size_t got = 0;
    int lr;
    while ((lr = cli_read_line(stdin, &line, &cap, &got, CLI_MAX_LINE)) == 1) {
        lineno++;
        if (line_text(line, got, jsonl, lineno, &b.texts[b.n], &b.lens[b.n])) {
            rc = 1;
            goto done;
        }
        b.bytes += b.lens[b.n];
        b.n++;
        if (b.n == EMBED_CHUNK_TEXTS || b.bytes >= EMBED_CHUNK_BYTES) {
            size_t n = b.n;
            if ((rc = flush(m, sp, eo, &b, index))) goto done;
            index += n;
        }
    }
    if (lr < 0) { /* a line too long, memory, a read error: the run stops, never a shorter input set */
        cli_line_error("embed", "stdin", lineno + 1, lr);
        rc = 1;
        goto done;
    }
    rc = flush(m, sp, eo, &b, index);
done:
    if (b.texts)
        for (size_t i = 0; i < b.n; i++) modattn_free(b.texts[i]);
    free(b.texts);
    free(b.lens);
    free(b.out);
    free(b.ntok);
    modattn_free(line);
    return rc;
}

int cli_cmd_embed(cli_globals *g, int argc, char **argv) {
    const char *model_dir = NULL;
    bool jsonl = false, from_stdin = false, dashdash = false;
    long long batch_tokens = 0;
    modattn_embed_options eo = {0};
    char **texts = calloc((size_t)argc + 1, sizeof *texts);
    size_t ntexts = 0;
    if (!texts) {
        fprintf(stderr, "modattn: embed: out of memory\n");
        return 1;
    }
    bool sparse = false, miss = false;
    const char *sparse_only = NULL, *v = NULL;
    sparse_run sp = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int pr;
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            if (strcmp(a, "--") == 0) {
                dashdash = true;
            } else if (cli_is_help(a)) {
                embed_usage(stdout);
                free(texts);
                return 0;
            } else if ((pr = cli_prompt_option("embed", argc, argv, &i, true, true, &eo)) >= 0) {
                if (pr) {
                    free(texts);
                    return 2;
                }
            } else if (strcmp(a, "--jsonl") == 0) {
                jsonl = true;
            } else if (strcmp(a, "--sparse") == 0) {
                sparse = true;
            } else if (strcmp(a, "--sparse-tokens") == 0) {
                sp.tokens = true;
            } else if ((v = cli_opt_value(argc, argv, &i, "--top-k", &miss)) || miss) {
                long long k;
                if (miss || cli_parse_ll("--top-k", v, 1, 1 << 24, &k)) goto bad_value;
                sp.opt.top_k = (size_t)k;
                sparse_only = "--top-k";
            } else if ((v = cli_opt_value(argc, argv, &i, "--threshold", &miss)) || miss) {
                double x;
                if (miss || cli_parse_double("--threshold", v, 0, 1e30, false, &x)) goto bad_value;
                sp.opt.threshold = (float)x;
                sparse_only = "--threshold";
            } else if (strcmp(a, "--model") == 0 || strncmp(a, "--model=", 8) == 0) {
                if (a[7] == '=') model_dir = a + 8;
                else if (i + 1 < argc) model_dir = argv[++i];
                else goto missing;
            } else if (strcmp(a, "--batch-tokens") == 0 || strncmp(a, "--batch-tokens=", 15) == 0) {
                const char *v = a[14] == '=' ? a + 15 : (i + 1 < argc ? argv[++i] : NULL);
                if (!v) goto missing;
                char *end;
                errno = 0;
                batch_tokens = strtoll(v, &end, 10);
                if (*v == '\0' || *end || errno || batch_tokens < 1 || batch_tokens > (1 << 22)) {
                    fprintf(stderr, "modattn: embed: --batch-tokens: '%s' is not a count in "
                            "[1, %d]\n", v, 1 << 22);
                    free(texts);
                    return 2;
                }
            } else {
                fprintf(stderr, "modattn: embed: unknown option '%s' (see modattn embed --help)\n",
                        a);
                free(texts);
                return 2;
            }
            continue;
        }
        if (!dashdash && strcmp(a, "-") == 0) from_stdin = true;
        else texts[ntexts++] = argv[i];
    }
    if (from_stdin && ntexts) {
        fprintf(stderr, "modattn: embed: give TEXT arguments or -, not both\n");
        free(texts);
        return 2;
    }
    if (!from_stdin && ntexts == 0) {
        fprintf(stderr, "modattn: embed: no input: give TEXT arguments, or - to read stdin\n");
        embed_usage(stderr);
        free(texts);
        return 2;
    }
    if (jsonl && !from_stdin) {
        fprintf(stderr, "modattn: embed: --jsonl applies to stdin (-)\n");
        free(texts);
        return 2;
    }
    if (sp.tokens) sparse_only = "--sparse-tokens";
    if (!sparse && sparse_only) {
        fprintf(stderr, "modattn: embed: %s applies to --sparse\n", sparse_only);
        free(texts);
        return 2;
    }
    if (sparse && (eo.prompt_name || eo.prompt || eo.dimensions)) {
        fprintf(stderr, "modattn: embed: --prompt, --prompt-name and --dimensions do not apply to --sparse\n");
        free(texts);
        return 2;
    }
    if (sparse && !model_dir) {
        fprintf(stderr, "modattn: embed: --sparse needs --model DIR (a SPLADE model: there is no default)\n");
        free(texts);
        return 2;
    }
    if (sparse) {
        modattn_ctx *ctx = NULL;
        if (cli_open_ctx(g, &ctx)) {
            free(texts);
            return 1;
        }
        int st = cli_load_sparse(g, ctx, model_dir, &sp.e), rc = 0;
        if (st) rc = cli_fail("loading the SPLADE model", st);
        else if (batch_tokens && (st = modattn_model_set_batch_tokens(modattn_sparse_model(sp.e), (size_t)batch_tokens)))
            rc = cli_fail("--batch-tokens", st);
        else if (from_stdin) rc = embed_stdin(NULL, &sp, &eo, jsonl);
        else rc = sparse_texts(&sp, (const char *const *)texts, NULL, ntexts, 0);
        modattn_sparse_free(sp.e);
        free(texts);
        return rc;
    }
    char dbuf[PATH_MAX + 64];
    model_dir = cli_model_dir(model_dir, dbuf, sizeof dbuf); /* --model, $MODATTN_MODEL, ... */

    modattn_ctx *ctx = NULL;
    if (cli_open_ctx(g, &ctx)) {
        free(texts);
        return 1;
    }
    modattn_model *m = NULL;
    int st = cli_load_model(g, ctx, model_dir, &m);
    if (st) {
        free(texts);
        return cli_fail("loading the model", st);
    }
    int rc = cli_prompt_check("embed", m, &eo, true);
    if (rc) {
        /* said */
    } else if (batch_tokens && (st = modattn_model_set_batch_tokens(m, (size_t)batch_tokens))) {
        rc = cli_fail("--batch-tokens", st);
    } else if (from_stdin) {
        rc = embed_stdin(m, NULL, &eo, jsonl);
    } else {
        size_t dim = modattn_model_embed_dim(m, &eo);
        float *out = malloc(ntexts * dim * sizeof(float));
        int32_t *ntok = malloc(ntexts * sizeof(int32_t));
        if (!out || !ntok) {
            fprintf(stderr, "modattn: embed: out of memory\n");
            rc = 1;
        } else if ((st = modattn_model_embed_opt(m, NULL, &eo, (const char *const *)texts, NULL, ntexts, out,
                                                 ntok))) {
            rc = cli_fail("embed", st);
        } else {
            for (size_t i = 0; i < ntexts; i++) print_result(i, ntok[i], out + i * dim, dim);
            if (cli_stdout_check()) rc = 1;
        }
        free(out);
        free(ntok);
    }
    modattn_model_free(m);
    free(texts);
    return rc;
missing:
    fprintf(stderr, "modattn: embed: %s needs a value\n", argv[argc - 1]);
    free(texts);
    return 2;
bad_value:
    if (miss) fprintf(stderr, "modattn: embed: %s needs a value\n", argv[argc - 1]);
    free(texts);
    return 2;
}
