/* tests/backends/test_kernel_memory.c — the fast CPU implementations must not grow memory with
 * use: after a warm-up, 200 more calls of each (cpu_flash, cpu_blas, whichever are built in) may
 * not raise the process' resident set by more than 4 MiB. This is what catches a BLAS that
 * caches per-call buffers or leaks inside (oneDNN's sgemm mallocs and frees a packing buffer per
 * call; OpenBLAS works in buffers it mapped once): their memory is not ours to account, so it is
 * checked from the outside. Linux only (/proc/self/statm); elsewhere it passes trivially. Under
 * AddressSanitizer freed blocks sit in its quarantine, so the RSS says nothing: the calls still run
 * (for ASan's own checks) but the growth is not judged. */
#include "modattn/modattn.h"
#include "core/internal_core.h"
#include "test_util.h"

#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long size = 0, res = 0;
    int n = fscanf(f, "%ld %ld", &size, &res);
    fclose(f);
    return n == 2 ? res * sysconf(_SC_PAGESIZE) : -1;
}

int main(void) {
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    if (!ctx) return test_finish("test_kernel_memory");
    const int64_t B = 2, H = 4, S = 384, D = 64;
    size_t n = (size_t)(B * H * S * D);
    float *q = modattn__malloc(n * 4, MODATTN_MEM_OTHER), *k = modattn__malloc(n * 4, MODATTN_MEM_OTHER);
    float *v = modattn__malloc(n * 4, MODATTN_MEM_OTHER), *out = modattn__malloc(n * 4, MODATTN_MEM_OTHER);
    CHECK(q && k && v && out);
    for (size_t i = 0; i < n; i++) q[i] = k[i] = v[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
    c.o = modattn_tensor_contiguous(out, MODATTN_DTYPE_F32, B, H, S, D);
    static const char *names[] = {"cpu_flash", "cpu_blas"};
    for (size_t t = 0; t < sizeof names / sizeof *names; t++) {
        long idx = modattn_ctx_find(ctx, names[t]);
        CHECK_MSG(idx >= 0, "%s: not built in (both are, in every build)", names[t]);
        if (idx < 0) continue;
        for (int i = 0; i < 20; i++) CHECK(modattn_attention_with(ctx, (size_t)idx, &c) == 0); /* warm-up */
        long before = rss_bytes();
        for (int i = 0; i < 200; i++) {
            c.causal = i & 1;
            CHECK(modattn_attention_with(ctx, (size_t)idx, &c) == 0);
        }
        long after = rss_bytes();
        printf("%s: RSS %ld KiB -> %ld KiB over 200 calls\n", names[t], before / 1024, after / 1024);
        if (UNDER_ASAN || before < 0 || after < 0)
            printf("%s: the RSS bound is not checked here: %s\n", names[t],
                   UNDER_ASAN ? "under ASan (its quarantine and shadow memory grow RSS)" : "no /proc/self/statm");
        else
            CHECK_MSG(after - before <= 4L << 20, "%s: RSS grew by %ld KiB over 200 calls", names[t],
                      (after - before) / 1024);
    }
    modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(out);
    modattn_ctx_free(ctx);
    return test_finish("test_kernel_memory");
}
