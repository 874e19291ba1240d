/* A plugin whose init fails (say, its device is missing): must be refused, with its reason. */
#include "modattn/backend/impl.h"
#include <stdio.h>
static int init(void *c, char *r, size_t n) {
    (void)c;
    snprintf(r, n, "no accelerator found (test plugin)");
    return -8;
}
static bool sup(void *c, const modattn_attn_desc *d, char *r, size_t n) { (void)c, (void)d, (void)r, (void)n; return true; }
static int run(void *c, const modattn_attn_desc *d, const modattn_attn_call *k, void *w, size_t wb,
               const modattn_exec *e, char *r, size_t n) {
    (void)c, (void)d, (void)k, (void)w, (void)wb, (void)e, (void)r, (void)n;
    return 0;
}
static const modattn_attn_impl impl = {MODATTN_IMPL_API_VERSION, "failing_init_plugin", "init fails",
                                       MODATTN_DEVICE_CPU, 1000, 0, init, 0, sup, 0, run, 0};
__attribute__((visibility("default"))) const modattn_attn_impl *modattn_plugin_entry(void) { return &impl; }
