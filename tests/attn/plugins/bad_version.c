/* A plugin built against another api_version: must be refused, never loaded. */
#include "modattn/backend/impl.h"
static bool sup(void *c, const modattn_attn_desc *d, char *r, size_t n) { (void)c, (void)d, (void)r, (void)n; return true; }
static int run(void *c, const modattn_attn_desc *d, const modattn_attn_call *k, void *w, size_t wb,
               const modattn_exec *e, char *r, size_t n) {
    (void)c, (void)d, (void)k, (void)w, (void)wb, (void)e, (void)r, (void)n;
    return 0;
}
static const modattn_attn_impl impl = {MODATTN_IMPL_API_VERSION + 98, "future_plugin", "from the future",
                                       MODATTN_DEVICE_CPU, 1000, 0, 0, 0, sup, 0, run, 0};
__attribute__((visibility("default"))) const modattn_attn_impl *modattn_plugin_entry(void) { return &impl; }
