/* tests/memory/test_json_model.c — jansson's allocations counted on the real model
 * (all-MiniLM-L6-v2): once routed, parsing tokenizer.json shows in the "other" category, the
 * model load's "other" peak grows by what the parse holds (its total peak does not: the tree is
 * freed before the weights are read), everything returns to where it was after the model is
 * freed, and a budget too small for the parse fails the load cleanly, naming the budget and
 * tokenizer.json, with nothing leaked. */
#include "modattn/model.h"
#include "modattn/modattn.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "test_util.h"

#include <jansson.h>
#include <sys/stat.h>

static const char *MODEL = ".models/all-MiniLM-L6-v2";
static const char *TOKJSON = ".models/all-MiniLM-L6-v2/tokenizer.json";

static modattn_mem_stats now(void) {
    modattn_mem_stats s;
    modattn_mem_get_stats(&s);
    return s;
}

/* Loads and frees the model; returns the status, and the peaks (total, other) above `base`. */
static int load_peaks(modattn_ctx *ctx, const modattn_mem_stats *base, int64_t *peak_total, int64_t *peak_other) {
    modattn__mem_reset_peak();
    modattn_model *m = NULL;
    int st = modattn_model_load(ctx, MODEL, &m);
    modattn_mem_stats s = now();
    if (peak_total) *peak_total = s.peak_total - base->current_total;
    if (peak_other) *peak_other = s.peak[MODATTN_MEM_OTHER] - base->current[MODATTN_MEM_OTHER];
    modattn_model_free(m);
    return st;
}

int main(void) {
    struct stat sb;
    if (stat(TOKJSON, &sb) != 0) {
        fprintf(stderr, "test_json_model: %s is missing: run `make model`\n", TOKJSON);
        return 1;
    }
    const int64_t file_size = (int64_t)sb.st_size;
    modattn_ctx_options o = {.threads = 2, .plugin_path = ""};
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    modattn_model *warm = NULL; /* first load: what is built once and kept (dispatch caches) */
    CHECK(modattn_model_load(ctx, MODEL, &warm) == 0);
    modattn_model_free(warm);

    /* not routed: jansson is invisible */
    CHECK(!modattn__json_allocations_counted());
    modattn_mem_stats base = now();
    int64_t plain_total = 0, plain_other = 0;
    CHECK(load_peaks(ctx, &base, &plain_total, &plain_other) == 0);
    CHECK(now().current_total == base.current_total);
    /* a budget with room for that load plus the size of tokenizer.json: enough, unrouted */
    const int64_t budget = base.current_total + plain_total + file_size;
    modattn_mem_set_budget(budget);
    int st = load_peaks(ctx, &base, NULL, NULL);
    modattn_mem_set_budget(0);
    CHECK_MSG(st == 0, "unrouted load under %lld bytes: %s", (long long)budget, modattn_last_error());

    /* routed */
    CHECK(modattn__json_count_allocations() == 0);
    base = now();

    /* the parsed tokenizer.json alone: counted in "other", un-counted by json_decref */
    json_t *tree = NULL;
    CHECK(modattn__json_load_file(TOKJSON, 0, &tree, NULL) == 0);
    int64_t tree_bytes = now().current[MODATTN_MEM_OTHER] - base.current[MODATTN_MEM_OTHER];
    json_decref(tree);
    printf("tokenizer.json: %lld bytes of file, %lld bytes held by the parsed tree\n", (long long)file_size,
           (long long)tree_bytes);
    CHECK(tree_bytes > file_size);
    CHECK(now().current_total == base.current_total);

    /* (a) the model load's "other" peak now includes the parse */
    int64_t routed_total = 0, routed_other = 0;
    CHECK(load_peaks(ctx, &base, &routed_total, &routed_other) == 0);
    printf("model load peaks above the start: other %lld -> %lld bytes, total %lld -> %lld bytes\n",
           (long long)plain_other, (long long)routed_other, (long long)plain_total, (long long)routed_total);
    CHECK_MSG(routed_other > file_size, "other peak %lld", (long long)routed_other);
    CHECK_MSG(routed_other - plain_other >= tree_bytes - tree_bytes / 20,
              "other peak grew by %lld bytes, the parse holds %lld", (long long)(routed_other - plain_other),
              (long long)tree_bytes);
    modattn_mem_stats after = now();
    CHECK_MSG(after.current_total == base.current_total && after.current[MODATTN_MEM_OTHER] == base.current[MODATTN_MEM_OTHER],
              "after the model is freed: %lld bytes more in use (%lld other)",
              (long long)(after.current_total - base.current_total),
              (long long)(after.current[MODATTN_MEM_OTHER] - base.current[MODATTN_MEM_OTHER]));

    /* (b) tokenizer.json is parsed before the weights are read, and its tree freed before they
     * come: counting the parse does not raise the load's total peak, the weights do */
    CHECK_MSG(routed_total - plain_total < tree_bytes / 2, "total peak grew by %lld bytes with the parse counted",
              (long long)(routed_total - plain_total));
    modattn_mem_set_budget(budget); /* so the budget that sufficed unrouted still does */
    st = load_peaks(ctx, &base, NULL, NULL);
    modattn_mem_set_budget(0);
    CHECK_MSG(st == 0, "routed load under %lld bytes: %s", (long long)budget, modattn_last_error());
    /* a budget with room for half the tree: the load fails cleanly in the parse, naming the
     * budget and the file, with nothing leaked */
    const int64_t small = base.current_total + tree_bytes / 2;
    char want[80];
    snprintf(want, sizeof want, "memory budget of %lld bytes", (long long)small);
    modattn_mem_set_budget(small);
    st = load_peaks(ctx, &base, NULL, NULL);
    modattn_mem_set_budget(0);
    printf("model load under %lld bytes: %s\n", (long long)small, modattn_last_error());
    CHECK_MSG(st == MODATTN_EBUDGET && strstr(modattn_last_error(), want) && strstr(modattn_last_error(), "tokenizer.json"),
              "status %d, message '%s'", st, modattn_last_error());
    CHECK(now().current_total == base.current_total);

    /* the parse itself over the budget: the tokenizer alone, with room for half the tree */
    int64_t tok_budget = base.current_total + tree_bytes / 2;
    snprintf(want, sizeof want, "memory budget of %lld bytes", (long long)tok_budget);
    modattn_mem_set_budget(tok_budget);
    modattn__mem_reset_peak();
    modattn_tokenizer *t = NULL;
    st = modattn_tokenizer_load(TOKJSON, &t);
    modattn_mem_set_budget(0);
    modattn_mem_stats s = now();
    printf("tokenizer load under %lld bytes: %s (peak %lld bytes past the budget)\n", (long long)tok_budget,
           modattn_last_error(), (long long)(s.peak_total - tok_budget));
    CHECK_MSG(st == MODATTN_EBUDGET && t == NULL && strstr(modattn_last_error(), want) &&
                  strstr(modattn_last_error(), "reading the JSON") && strstr(modattn_last_error(), "tokenizer.json"),
              "status %d, message '%s'", st, modattn_last_error());
    CHECK(s.peak_total - tok_budget < 64 * 1024); /* the parse stopped within a block of input */
    CHECK(s.current_total == base.current_total);
    CHECK(modattn__json_take_failure() == 0); /* the parse reported it: nothing left pending */

    modattn_ctx_free(ctx);
    return test_finish("test_json_model");
}
