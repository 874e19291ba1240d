/* tests/memory/test_no_growth.c — embedding 10,000 inputs in 100 batches: the bytes in use return to
 * the same value after every batch (nothing grows with the number of calls) and to the starting
 * value at teardown. Uses the real model (run `make model`). */
#include "modattn/model.h"
#include "modattn/modattn.h"
#include "test_util.h"

#include <sys/stat.h>

#define BATCHES 100
#define PER_BATCH 100

static const char *words[] = {"attention", "kernel", "memory", "the", "quick", "brown", "fox", "jumps", "über",
                              "日本語", "profiler", "leak", "budget", "vector", "search", "document", "🙂", "naïve"};

int main(void) {
    const char *dir = ".models/all-MiniLM-L6-v2";
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        fprintf(stderr, "test_no_growth: model directory %s is missing: run `make model`\n", dir);
        return 1;
    }
    modattn_mem_stats m0, m;
    modattn_mem_get_stats(&m0);
    modattn_ctx *ctx;
    modattn_ctx_options o = {.threads = 2, .plugin_path = ""};
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    modattn_model *model = NULL;
    int st = modattn_model_load(ctx, dir, &model);
    CHECK_MSG(st == 0, "load: %s", modattn_last_error());
    if (st) return test_finish("test_no_growth");
    size_t dim = modattn_model_dim(model);
    float *out = malloc(PER_BATCH * dim * sizeof(float));
    char texts[PER_BATCH][128];
    const char *ptrs[PER_BATCH];
    int64_t after_first = -1;
    int grew = 0;
    uint32_t r = 7;
    for (int b = 0; b < BATCHES; b++) {
        for (int i = 0; i < PER_BATCH; i++) {
            int n = 1 + (int)((r = r * 1103515245u + 12345u) >> 16) % 12, used = 0;
            for (int w = 0; w < n; w++) {
                const char *wd = words[((r = r * 1103515245u + 12345u) >> 16) % (sizeof words / sizeof *words)];
                used += snprintf(texts[i] + used, sizeof texts[i] - (size_t)used, "%s%s", w ? " " : "", wd);
            }
            ptrs[i] = texts[i];
        }
        st = modattn_model_embed(model, ptrs, NULL, PER_BATCH, out, NULL);
        if (st) {
            CHECK_MSG(0, "batch %d: %s", b, modattn_last_error());
            break;
        }
        modattn_mem_get_stats(&m);
        if (after_first < 0) after_first = m.current_total;
        else if (m.current_total != after_first) {
            if (!grew) fprintf(stderr, "batch %d: %lld bytes in use, %lld after the first batch\n", b,
                               (long long)m.current_total, (long long)after_first);
            grew++;
        }
    }
    CHECK_MSG(grew == 0, "bytes in use changed after %d of %d batches", grew, BATCHES - 1);
    printf("bytes in use after every batch: %lld (weights %lld, activations %lld, workspace %lld)\n",
           (long long)after_first, (long long)m.current[MODATTN_MEM_WEIGHTS], (long long)m.current[MODATTN_MEM_ACTIVATIONS],
           (long long)m.current[MODATTN_MEM_WORKSPACE]);
    modattn_model_free(model);
    modattn_ctx_free(ctx);
    free(out);
    modattn_mem_get_stats(&m);
    CHECK_MSG(m.current_total == m0.current_total, "%lld bytes still in use at teardown",
              (long long)(m.current_total - m0.current_total));
    return test_finish("test_no_growth");
}
