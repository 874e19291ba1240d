/* core/kernel_twins.c — which copy of the hot kernels a sanitizer build runs, and the entry check
 * that stands in for the instrumentation the uninstrumented copy lacks (core/internal_core.h). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "core/internal_core.h"
#include "core/env.h"

#if defined(__SANITIZE_ADDRESS__)
#define TWINS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TWINS_ASAN 1
#endif
#endif

#ifdef TWINS_ASAN
#include <sanitizer/asan_interface.h>
#endif

bool modattn__kernel_twins_on(void) {
#if defined(MODATTN_KERNEL_TWINS) && defined(TWINS_ASAN)
    /* read once: every call of the process runs the same copy (0 unread, 1 full, 2 entry) */
    static atomic_int mode;
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m == 0) {
        m = modattn__env_has("MODATTN_ASAN_KERNELS", "entry") ? 2 : 1;
        atomic_store_explicit(&mode, m, memory_order_relaxed);
    }
    return m == 2;
#else
    return false;
#endif
}

void modattn__asan_check_region(const void *p, size_t bytes, bool write, const char *what) {
#ifdef TWINS_ASAN
    if (!p || !bytes) return;
    const volatile char *bad = __asan_region_is_poisoned((void *)(uintptr_t)p, bytes);
    if (!bad) return;
    fprintf(stderr,
            "modattn: %s: the %zu bytes the kernel %s at %p reach %p (byte %zu), which is not live memory "
            "(MODATTN_ASAN_KERNELS=entry: checked at the call's entry); ASan's report follows\n",
            what, bytes, write ? "writes" : "reads", p, (const void *)bad, (size_t)((const char *)bad - (const char *)p));
    fflush(stderr);
    /* an instrumented read of that byte: ASan reports it (its kind of memory, where it was
     * allocated or freed, this call's stack) and stops the process */
    (void)*bad;
#else
    (void)p, (void)bytes, (void)write, (void)what;
#endif
}
