/* tests/model/test_prompts.c — prompts and Matryoshka dimensions (model/prompts.c) against
 * sentence-transformers' encode / encode_query / encode_document (tests/fixtures/golden_prompts.jsonl,
 * tools/make_prompt_goldens.py), on models made here as the generator made them: links to the files
 * of .models/all-MiniLM-L6-v2 (and tiny-bert-cls) with a config_sentence_transformers.json of
 * tests/fixtures/prompt_model/. Then the refusals (unknown prompt name, dimensions out of range,
 * malformed configs, include_prompt false) and a store's identity (prompts and dimensions). */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/model.h"
#include "modattn/store.h"
#include "pipeline/internal_store.h"
#include "test_util.h"

static char g_tmp[512];

/* dest: links to every entry of base but config_sentence_transformers.json, and cfg (a JSON text)
 * as that file; pooling_cfg (may be NULL): the 1_Pooling/config.json text instead of the link. */
static int make_model(const char *base, const char *dest, const char *cfg, const char *pooling_cfg) {
    char rb[4096], p[4096], q[4096];
    if (!realpath(base, rb) || mkdir(dest, 0755) != 0) return -1;
    DIR *d = opendir(rb);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "config_sentence_transformers.json") == 0) continue;
        if (pooling_cfg && strcmp(e->d_name, "1_Pooling") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", rb, e->d_name);
        snprintf(q, sizeof q, "%s/%s", dest, e->d_name);
        if (symlink(p, q) != 0) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    if (pooling_cfg) {
        snprintf(q, sizeof q, "%s/1_Pooling", dest);
        mkdir(q, 0755);
        snprintf(q, sizeof q, "%s/1_Pooling/config.json", dest);
        FILE *f = fopen(q, "w");
        if (!f) return -1;
        fputs(pooling_cfg, f);
        fclose(f);
    }
    if (cfg) {
        snprintf(q, sizeof q, "%s/config_sentence_transformers.json", dest);
        FILE *f = fopen(q, "w");
        if (!f) return -1;
        fputs(cfg, f);
        fclose(f);
    }
    return 0;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

static double cosine(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
}

typedef struct loaded {
    const char *key;
    modattn_model *m;
} loaded;

static void goldens(modattn_ctx *ctx) {
    char d1[600], d2[600], d3[600];
    snprintf(d1, sizeof d1, "%s/minilm-prompts", g_tmp);
    snprintf(d2, sizeof d2, "%s/minilm-default", g_tmp);
    snprintf(d3, sizeof d3, "%s/tiny-prompts", g_tmp);
    char *c1 = slurp("tests/fixtures/prompt_model/config_sentence_transformers.json");
    char *c2 = slurp("tests/fixtures/prompt_model/config_default.json");
    CHECK(c1 && c2);
    CHECK(make_model(".models/all-MiniLM-L6-v2", d1, c1, NULL) == 0);
    CHECK(make_model(".models/all-MiniLM-L6-v2", d2, c2, NULL) == 0);
    CHECK(make_model(".models/tiny-bert-cls", d3, c1, NULL) == 0);
    free(c1), free(c2);
    loaded L[3] = {{"minilm/prompts", NULL}, {"minilm/default", NULL}, {"tiny/prompts", NULL}};
    const char *dirs[3] = {d1, d2, d3};
    for (int i = 0; i < 3; i++) CHECK_MSG(modattn_model_load(ctx, dirs[i], &L[i].m) == 0, "%s: %s", dirs[i], modattn_last_error());
    if (!L[0].m || !L[1].m || !L[2].m) goto out;

    /* what the files say */
    /* sentence-transformers' "query" and "document" first, "" unless set */
    CHECK(modattn_model_prompt_count(L[0].m) == 4 && modattn_model_default_prompt_name(L[0].m) == NULL);
    const char *nm = NULL, *tx = NULL;
    CHECK(modattn_model_prompt_at(L[0].m, 1, &nm, &tx) == 0 && strcmp(nm, "document") == 0 && strcmp(tx, "") == 0);
    CHECK(modattn_model_prompt_at(L[0].m, 2, &nm, &tx) == 0 && strcmp(nm, "passage") == 0 && strcmp(tx, "passage: ") == 0);
    CHECK(modattn_model_prompt_at(L[0].m, 4, &nm, &tx) == MODATTN_ERANGE);
    CHECK(modattn_model_prompt_count(L[1].m) == 2);
    CHECK(modattn_model_prompt_at(L[1].m, 1, &nm, &tx) == 0 && strcmp(nm, "document") == 0 && strcmp(tx, "passage: ") == 0);
    CHECK(modattn_model_default_prompt_name(L[1].m) && strcmp(modattn_model_default_prompt_name(L[1].m), "query") == 0);
    const modattn_model_info *i0 = modattn_model_get_info(L[0].m), *i1 = modattn_model_get_info(L[1].m);
    CHECK(i0->query_prompt && strcmp(i0->query_prompt, "query: ") == 0);
    /* encode_document picks "document" (empty here) before "passage", as sentence-transformers 6 */
    CHECK(i0->document_prompt == NULL);
    CHECK(i1->document_prompt && strcmp(i1->document_prompt, "passage: ") == 0);
    CHECK(i0->truncate_dim == 0 && i1->truncate_dim == 128);
    CHECK(modattn_model_embed_dim(L[1].m, NULL) == 128 && modattn_model_embed_dim(L[0].m, NULL) == 384);

    FILE *f = fopen("tests/fixtures/golden_prompts.jsonl", "r");
    CHECK_MSG(f != NULL, "tests/fixtures/golden_prompts.jsonl");
    if (!f) goto out;
    char *line = NULL;
    size_t cap = 0, rows = 0, alone_batched_differ = 0;
    double worst = 1;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        json_error_t err;
        json_t *r = json_loadb(line, (size_t)got, 0, &err);
        CHECK_MSG(r != NULL, "fixture line: %s", err.text);
        if (!r) continue;
        char key[64];
        snprintf(key, sizeof key, "%s/%s", json_string_value(json_object_get(r, "model")),
                 json_string_value(json_object_get(r, "config")));
        modattn_model *m = NULL;
        for (int i = 0; i < 3; i++)
            if (strcmp(L[i].key, key) == 0) m = L[i].m;
        CHECK_MSG(m != NULL, "fixture model %s", key);
        const char *call = json_string_value(json_object_get(r, "call"));
        modattn_embed_options o = {0};
        o.task = strcmp(call, "encode_query") == 0      ? MODATTN_EMBED_QUERY
                 : strcmp(call, "encode_document") == 0 ? MODATTN_EMBED_DOCUMENT
                                                        : MODATTN_EMBED_PLAIN;
        o.prompt_name = json_string_value(json_object_get(r, "prompt_name"));
        o.prompt = json_string_value(json_object_get(r, "prompt"));
        if (json_is_integer(json_object_get(r, "truncate_dim")))
            o.dimensions = (size_t)json_integer_value(json_object_get(r, "truncate_dim"));
        const json_t *ej = json_object_get(r, "embedding");
        const size_t dim = json_array_size(ej);
        const char *text = json_string_value(json_object_get(r, "text"));
        float *want = calloc(dim, sizeof *want), *got_v = calloc(dim + 1, sizeof *got_v);
        for (size_t k = 0; k < dim; k++) want[k] = (float)json_real_value(json_array_get(ej, k));
        int32_t ntok = -1;
        if (m) {
            CHECK_MSG(modattn_model_embed_dim(m, &o) == dim, "%s %s: dim %zu, want %zu", key, call,
                      modattn_model_embed_dim(m, &o), dim);
            got_v[dim] = 12345.0f; /* nothing written past [dim] */
            int st = modattn_model_embed_opt(m, NULL, &o, &text, NULL, 1, got_v, &ntok);
            CHECK_MSG(st == 0, "%s: %s", key, modattn_last_error());
            CHECK(got_v[dim] == 12345.0f);
            double c = cosine(got_v, want, dim);
            if (c < worst) worst = c;
            CHECK_MSG(c >= 0.99999, "%s %s prompt_name=%s prompt=%s dims=%zu text '%.40s': cosine %.9f", key, call,
                      o.prompt_name ? o.prompt_name : "-", o.prompt ? o.prompt : "-", o.dimensions, text, c);
            /* the length too (a cosine does not see a missing re-normalisation) */
            double ng = 0, nw = 0;
            for (size_t k = 0; k < dim; k++) ng += (double)got_v[k] * got_v[k], nw += (double)want[k] * want[k];
            ng = sqrt(ng), nw = sqrt(nw);
            CHECK_MSG(fabs(ng - nw) <= 1e-5 * (nw > 1 ? nw : 1), "%s %s dims=%zu '%.40s': length %.9f, want %.9f", key,
                      call, o.dimensions, text, ng, nw);
            CHECK_MSG(ntok == (int32_t)json_integer_value(json_object_get(r, "tokens")), "%s %s '%.40s': %d tokens, want %d",
                      key, call, text, (int)ntok, (int)json_integer_value(json_object_get(r, "tokens")));
            /* batched with two other texts: the same bits */
            const char *three[3] = {"another text first", text, "and one after it, a little longer than that"};
            float *b3 = calloc(3 * dim, sizeof *b3);
            CHECK(modattn_model_embed_opt(m, NULL, &o, three, NULL, 3, b3, NULL) == 0);
            alone_batched_differ += memcmp(b3 + dim, got_v, dim * sizeof *b3) != 0;
            free(b3);
        }
        free(want), free(got_v);
        json_decref(r);
        rows++;
    }
    free(line);
    fclose(f);
    CHECK_MSG(rows >= 80, "%zu fixture rows", rows);
    CHECK_MSG(alone_batched_differ == 0, "%zu texts differ alone vs batched", alone_batched_differ);
    printf("goldens: %zu rows, min cosine %.9f, alone == batched bit for bit: %s\n", rows, worst,
           alone_batched_differ ? "no" : "yes");

    /* the refusals */
    modattn_embed_options o = {.prompt_name = "nope"};
    const char *t = "x";
    float v[384];
    CHECK_ERR(modattn_model_embed_opt(L[0].m, NULL, &o, &t, NULL, 1, v, NULL), MODATTN_ENOTFOUND,
              "no prompt named \"nope\" (its prompts: \"query\", \"document\", \"passage\", \"instruct\")");
    modattn_embed_options o2 = {.dimensions = 385};
    CHECK_ERR(modattn_model_embed_opt(L[0].m, NULL, &o2, &t, NULL, 1, v, NULL), MODATTN_EINVAL, "use 1 to 384");
    CHECK(modattn_model_embed_dim(L[0].m, &o2) == 0);
    /* the plain call stays as it was: no prompt, every dimension (a model with a default prompt) */
    float raw[384], plain[384];
    CHECK(modattn_model_embed(L[1].m, &t, NULL, 1, raw, NULL) == 0);
    modattn_embed_options none = {.prompt = "", .dimensions = 384};
    CHECK(modattn_model_embed_opt(L[1].m, NULL, &none, &t, NULL, 1, plain, NULL) == 0);
    CHECK(memcmp(raw, plain, sizeof raw) == 0);
out:
    for (int i = 0; i < 3; i++) modattn_model_free(L[i].m);
}

static void refusals(modattn_ctx *ctx) {
    static const struct {
        const char *cfg, *needle;
    } bad[] = {
        {"{\"prompts\": [\"query: \"]}", "field \"prompts\" must be an object"},
        {"{\"prompts\": {\"query\": 3}}", "\"prompts\".\"query\" must be a string"},
        {"{\"prompts\": {\"query\": \"q\"}, \"default_prompt_name\": \"passage\"}", "\"default_prompt_name\" = \"passage\" is not one of"},
        {"{\"prompts\": {}, \"default_prompt_name\": 1}", "\"default_prompt_name\" must be a string or null"},
        {"{\"truncate_dim\": 0}", "\"truncate_dim\" must be an integer in [1, 384]"},
        {"{\"truncate_dim\": 385}", "\"truncate_dim\" must be an integer in [1, 384]"},
        {"[1, 2]", "not a JSON object"},
        {"{\"prompts\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char d[600];
        snprintf(d, sizeof d, "%s/bad%zu", g_tmp, i);
        CHECK(make_model(".models/all-MiniLM-L6-v2", d, bad[i].cfg, NULL) == 0);
        modattn_model *m = NULL;
        CHECK_ERR(modattn_model_load(ctx, d, &m), MODATTN_EFORMAT, bad[i].needle);
        CHECK(m == NULL);
    }
    /* null prompts read as "" (as sentence-transformers); null default and truncate_dim: none */
    char d[600];
    snprintf(d, sizeof d, "%s/nulls", g_tmp);
    CHECK(make_model(".models/all-MiniLM-L6-v2", d, "{\"prompts\": {\"query\": null}, \"default_prompt_name\": null, "
                     "\"truncate_dim\": null}", NULL) == 0);
    modattn_model *m = NULL;
    CHECK_MSG(modattn_model_load(ctx, d, &m) == 0, "%s", modattn_last_error());
    if (m) CHECK(modattn_model_prompt_count(m) == 2 && modattn_model_get_info(m)->query_prompt == NULL);
    modattn_model_free(m);
    /* include_prompt false: refused when a prompt is used, fine without one */
    snprintf(d, sizeof d, "%s/exclude", g_tmp);
    char *pool = slurp(".models/all-MiniLM-L6-v2/1_Pooling/config.json");
    CHECK(pool != NULL);
    if (!pool) return;
    char *pool2 = calloc(strlen(pool) + 64, 1), *brace = strrchr(pool, '}');
    CHECK(pool2 && brace);
    if (!pool2 || !brace) return;
    *brace = '\0';
    snprintf(pool2, strlen(pool) + 64, "%s, \"include_prompt\": false}\n", pool);
    free(pool);
    pool = pool2;
    CHECK(make_model(".models/all-MiniLM-L6-v2", d, "{\"prompts\": {\"query\": \"query: \"}}", pool) == 0);
    free(pool);
    CHECK_MSG(modattn_model_load(ctx, d, &m) == 0, "%s", modattn_last_error());
    if (m) {
        const char *t = "hello";
        float v[384];
        modattn_embed_options q = {.task = MODATTN_EMBED_QUERY};
        CHECK_ERR(modattn_model_embed_opt(m, NULL, &q, &t, NULL, 1, v, NULL), MODATTN_EUNSUPPORTED, "include_prompt");
        CHECK(modattn_model_embed_opt(m, NULL, NULL, &t, NULL, 1, v, NULL) == 0);
    }
    modattn_model_free(m);
}

/* A store records the prompts and the dimensions and refuses others, naming the fix. */
static void store_identity(modattn_ctx *ctx) {
    char d[600], db[600];
    snprintf(d, sizeof d, "%s/minilm-default", g_tmp);
    snprintf(db, sizeof db, "%s/p.db", g_tmp);
    modattn_model *m = NULL;
    CHECK(modattn_model_load(ctx, d, &m) == 0);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(db, MODATTN_STORE_CREATE, &s) == 0);
    if (!m || !s) goto out;
    modattn_embed_options eo, asked = {.dimensions = 64};
    modattn_store_model sm;
    /* indexing: the document prompt, 64 dimensions */
    CHECK(modattn_store_embed_options(s, m, &asked, false, &eo, &sm) == 0);
    CHECK(eo.task == MODATTN_EMBED_DOCUMENT && sm.dim == 64 && strcmp(sm.document_prompt, "passage: ") == 0 &&
          strcmp(sm.query_prompt, "query: ") == 0);
    CHECK_MSG(modattn__store_bind_model(s, &sm) == 0, "%s", modattn_last_error());
    char buf[64];
    CHECK(modattn_store_get_prompt(s, false, buf, sizeof buf) == 0 && strcmp(buf, "passage: ") == 0);
    CHECK(modattn_store_get_prompt(s, true, buf, sizeof buf) == 0 && strcmp(buf, "query: ") == 0);
    CHECK(modattn_store_get_prompt(s, true, buf, 4) == MODATTN_ERANGE);
    /* searching: the store's dimensions without being asked, the query prompt */
    CHECK(modattn_store_embed_options(s, m, NULL, true, &eo, &sm) == 0);
    CHECK(eo.dimensions == 64 && sm.dim == 64 && eo.task == MODATTN_EMBED_QUERY && sm.document_prompt == NULL);
    CHECK_MSG(modattn_store_check_model(s, &sm) == 0, "%s", modattn_last_error());
    /* another query prompt: refused, naming both and the fix */
    modattn_embed_options other = {.prompt = "Instruct: find\nQuery: "};
    CHECK(modattn_store_embed_options(s, m, &other, true, &eo, &sm) == 0);
    CHECK_ERR(modattn_store_check_model(s, &sm), MODATTN_EVERSION, "for queries with the prompt \"query: \"");
    CHECK_ERR(modattn_store_check_model(s, &sm), MODATTN_EVERSION, "--prompt TEXT or --prompt-name NAME");
    modattn_embed_options noprompt = {.prompt = ""};
    CHECK(modattn_store_embed_options(s, m, &noprompt, true, &eo, &sm) == 0);
    CHECK_ERR(modattn_store_check_model(s, &sm), MODATTN_EVERSION, "the query prompt none");
    /* another document prompt when indexing: refused */
    modattn_embed_options doc = {.prompt = "doc: ", .dimensions = 64};
    CHECK(modattn_store_embed_options(s, m, &doc, false, &eo, &sm) == 0);
    CHECK_ERR(modattn__store_bind_model(s, &sm), MODATTN_EVERSION, "made with the document prompt \"passage: \"");
    /* other dimensions: refused with --dimensions 64 */
    modattn_embed_options d128 = {.dimensions = 128};
    CHECK(modattn_store_embed_options(s, m, &d128, true, &eo, &sm) == 0);
    CHECK_ERR(modattn_store_check_model(s, &sm), MODATTN_EVERSION, "Use --dimensions 64");
    /* out of range */
    modattn_embed_options big = {.dimensions = 1000};
    CHECK_ERR(modattn_store_embed_options(s, m, &big, true, &eo, &sm), MODATTN_EINVAL, "use 1 to 384");
out:
    modattn_store_close(s);
    modattn_model_free(m);
}

int main(void) {
    if (access(".models/all-MiniLM-L6-v2/model.safetensors", R_OK) != 0 ||
        access(".models/tiny-bert-cls/model.safetensors", R_OK) != 0) {
        printf("test_prompts: not available here: .models/all-MiniLM-L6-v2 or tiny-bert-cls missing (make model)\n");
        return 77;
    }
    snprintf(g_tmp, sizeof g_tmp, "%s/modattn-prompts-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    if (ctx) {
        goldens(ctx);
        refusals(ctx);
        store_identity(ctx);
    }
    modattn_ctx_free(ctx);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return test_finish("test_prompts");
}
