/* tests/attn/test_conformance.c — the conformance suite on every built-in implementation, and proof
 * that the suite catches each kind of fault (out-of-bounds write, modified input, inaccuracy, NaN,
 * wrong infinity) in deliberately faulty implementations. */
#include "attn/faulty.h"
#include "modattn/modattn.h"
#include "test_util.h"

int main(void) {
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = ""};
    CHECK(modattn_ctx_create(&opt, &ctx) == 0);
    CHECK(modattn_conformance_grid_size() >= 500);

    modattn_conformance_result r[64];
    size_t n = 0;
    int ran = 0;
    modattn_conformance_options co = {.log = stderr};
    CHECK(modattn_conformance_run(ctx, &co, r, 64, &n) == 0);
    CHECK(n == modattn_ctx_impl_count(ctx));
    for (size_t i = 0; i < n; i++) {
        printf("%-16s passed %d failed %d unsupported %d worst err/tol %.3f\n", r[i].name, r[i].passed, r[i].failed,
               r[i].unsupported, r[i].worst_ratio);
        CHECK_MSG(r[i].failed == 0, "%s: %s", r[i].name, r[i].first_failure);
        CHECK_MSG(r[i].passed + r[i].unsupported == modattn_conformance_grid_size(), "%s", r[i].name);
        if (r[i].unsupported) printf("  unsupported e.g.: %s\n", r[i].unsupported_reason);
        if (strcmp(r[i].name, "reference") == 0) CHECK(r[i].passed >= 500);
        /* an implementation that is available here must run some of the grid: one that refuses
         * every case would otherwise pass; the built-in CPU ones take the whole contract (fp32,
         * every shape, view, mask and option of the grid) */
        long idx = modattn_ctx_find(ctx, r[i].name);
        modattn_impl_info info;
        CHECK(idx >= 0 && modattn_ctx_impl_info(ctx, (size_t)idx, &info) == 0);
        if (idx < 0) continue;
        if (info.available)
            CHECK_MSG(r[i].passed > 0, "%s is available here and ran none of the grid (%d unsupported: %s)", r[i].name,
                      r[i].unsupported, r[i].unsupported_reason);
        else
            printf("  %s: not available here: %s\n", r[i].name, info.reason);
        if (!strcmp(info.origin, "builtin") && info.device == MODATTN_DEVICE_CPU)
            CHECK_MSG(info.available && r[i].passed == modattn_conformance_grid_size(),
                      "%s (built in, CPU) passed %d of the %d configurations (%d unsupported: %s)", r[i].name,
                      r[i].passed, modattn_conformance_grid_size(), r[i].unsupported, r[i].unsupported_reason);
        ran += r[i].passed > 0;
    }
    /* at least one implementation ran the grid */
    CHECK_MSG(ran > 0, "no implementation ran any of the grid");

    /* every faulty implementation must be caught */
    faulty_setup(ctx);
    const fault_kind caught[] = {FAULT_RUN_FAILS, FAULT_GUARD, FAULT_INPUT, FAULT_ACCURACY, FAULT_NAN, FAULT_LSE_SIGN};
    const char *why[] = {"simulated failure", "outside o's view", "modified its input", "exceeds the tolerance", "NaN",
                         "lse["};
    for (size_t k = 0; k < sizeof caught / sizeof *caught; k++) {
        CHECK(modattn_ctx_register(ctx, &g_faulty[caught[k]]) == 0);
        modattn_conformance_options one = {.only = g_faulty_names[caught[k]], .max_configs = 80};
        modattn_conformance_result fr;
        size_t fn = 0;
        CHECK(modattn_conformance_run(ctx, &one, &fr, 1, &fn) == 0 && fn == 1);
        CHECK_MSG(fr.failed > 0 && strstr(fr.first_failure, why[k]), "%s: failed %d, first failure '%s'",
                  g_faulty_names[caught[k]], fr.failed, fr.first_failure);
    }
    /* refusing and unavailable implementations count as unsupported, never as pass or fail */
    CHECK(modattn_ctx_register(ctx, &g_faulty[FAULT_REFUSES]) == 0);
    CHECK(modattn_ctx_register(ctx, &g_faulty[FAULT_INIT]) == 0);
    for (int k = 0; k < 2; k++) {
        modattn_conformance_options one = {.only = k ? "faulty_init" : "faulty_refuses", .max_configs = 30};
        modattn_conformance_result fr;
        size_t fn = 0;
        CHECK(modattn_conformance_run(ctx, &one, &fr, 1, &fn) == 0);
        CHECK(fr.unsupported == 30 && fr.passed == 0 && fr.failed == 0 && fr.unsupported_reason[0]);
    }
    modattn_conformance_options unknown = {.only = "nope"};
    CHECK_ERR(modattn_conformance_run(ctx, &unknown, r, 64, &n), MODATTN_ENOTFOUND, "nope");
    modattn_ctx_free(ctx);
    return test_finish("test_conformance");
}
