/* tests/attn/test_plugin.c — plugins: the reference built as a shared object loads and passes the
 * conformance suite; a wrong api_version, a missing entry symbol and a failing init are refused
 * with messages that say which and why, and leave nothing half-loaded. */
#include "modattn/modattn.h"
#include "test_util.h"

static bool any_error_contains(const modattn_ctx *ctx, const char *a, const char *b) {
    for (size_t i = 0; i < modattn_ctx_plugin_error_count(ctx); i++) {
        const char *m = modattn_ctx_plugin_error(ctx, i);
        if (strstr(m, a) && strstr(m, b)) return true;
    }
    return false;
}

int main(void) {
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = MODATTN_TEST_PLUGIN_DIR "/good"};
    CHECK(modattn_ctx_create(&opt, &ctx) == 0);
    long idx = modattn_ctx_find(ctx, "reference_plugin");
    CHECK(idx >= 0);
    modattn_impl_info info;
    CHECK(idx >= 0 && modattn_ctx_impl_info(ctx, (size_t)idx, &info) == 0 && info.available &&
          strstr(info.origin, ".so"));
    CHECK(modattn_ctx_plugin_error_count(ctx) == 0);
    modattn_conformance_options co = {.only = "reference_plugin", .log = stderr};
    modattn_conformance_result r;
    size_t n = 0;
    CHECK(modattn_conformance_run(ctx, &co, &r, 1, &n) == 0 && n == 1);
    CHECK_MSG(r.passed >= 500 && r.failed == 0, "passed %d failed %d: %s", r.passed, r.failed, r.first_failure);
    CHECK(modattn_ctx_set_policy(ctx, "reference_plugin") == 0);
    modattn_ctx_free(ctx);

    opt.plugin_path = MODATTN_TEST_PLUGIN_DIR "/bad:/nonexistent/modattn/plugins";
    CHECK(modattn_ctx_create(&opt, &ctx) == 0);
    CHECK(modattn_ctx_find(ctx, "future_plugin") < 0);
    CHECK(modattn_ctx_find(ctx, "failing_init_plugin") < 0);
    CHECK(modattn_ctx_find(ctx, "reference") >= 0); /* the built-ins are unaffected */
    CHECK(modattn_ctx_plugin_error_count(ctx) == 4);
    for (size_t i = 0; i < modattn_ctx_plugin_error_count(ctx); i++) printf("refused: %s\n", modattn_ctx_plugin_error(ctx, i));
    char future[32];
    snprintf(future, sizeof future, "api_version %u", MODATTN_IMPL_API_VERSION + 98);
    CHECK(any_error_contains(ctx, "bad_version", future));
    CHECK(any_error_contains(ctx, "no_entry", "exports no 'modattn_plugin_entry'"));
    CHECK(any_error_contains(ctx, "bad_init", "no accelerator found"));
    CHECK(any_error_contains(ctx, "/nonexistent/modattn/plugins", "does not exist"));
    modattn_ctx_free(ctx);

    /* loading one file directly reports the refusal as the call's error */
    CHECK(modattn_ctx_create(&(modattn_ctx_options){.threads = 1, .plugin_path = ""}, &ctx) == 0);
    CHECK_ERR(modattn_ctx_load_plugin(ctx, MODATTN_TEST_PLUGIN_DIR "/bad/libmodattn_plugin_bad_version.so"),
              MODATTN_EVERSION, "api_version");
    CHECK_ERR(modattn_ctx_load_plugin(ctx, "/nonexistent.so"), MODATTN_EIO, "cannot load");
    CHECK(modattn_ctx_impl_count(ctx) >= 1 && modattn_ctx_find(ctx, "future_plugin") < 0);
    modattn_ctx_free(ctx);
    return test_finish("test_plugin");
}
