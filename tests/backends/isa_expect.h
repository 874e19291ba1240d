/* tests/backends/isa_expect.h — which cpu_flash ISA must run on this CPU, decided by the test and not
 * taken from the library's own choice: the CPU's instructions as the compiler's runtime check sees
 * them (__builtin_cpu_supports, which also asks the OS for the registers), less what
 * MODATTN_CPU_DISABLE masks off. The same must come out of core/cpu.c (modattn__cpu_get()): a
 * detection that lost AVX-512 would otherwise make the kernel tests pass on the AVX2 path. */
#ifndef MODATTN_TEST_ISA_EXPECT_H
#define MODATTN_TEST_ISA_EXPECT_H
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "modattn/core.h"
#include "core/internal_core.h"

/* `name` is one of the comma-separated entries of MODATTN_CPU_DISABLE (any case, as core/cpu.c). */
static inline bool isa_masked(const char *name) {
    const char *list = getenv("MODATTN_CPU_DISABLE");
    if (!list) return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

typedef struct isa_expect {
    bool avx512, avx2; /* usable by cpu_flash: AVX-512F + FMA, AVX2 + FMA (after the mask) */
    bool neon;
    const char *widest; /* "avx512", "avx2", "neon" or "scalar": what cpu_flash must pick */
} isa_expect;

static inline isa_expect isa_expected(void) {
    isa_expect x = {false, false, false, "scalar"};
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool off_avx = isa_masked("avx");
    const bool fma = __builtin_cpu_supports("fma") && !isa_masked("fma") && !off_avx;
    x.avx512 = __builtin_cpu_supports("avx512f") && fma && !off_avx && !isa_masked("avx512f") && !isa_masked("avx512");
    x.avx2 = __builtin_cpu_supports("avx2") && fma && !off_avx && !isa_masked("avx2");
#elif defined(__aarch64__)
    x.neon = !isa_masked("neon");
#endif
    x.widest = x.avx512 ? "avx512" : x.avx2 ? "avx2" : x.neon ? "neon" : "scalar";
    return x;
}

/* The same from core/cpu.c's features (cpu_flash's rule: AVX-512F or AVX2, each with FMA). */
static inline const char *isa_from_modattn(void) {
    const modattn_cpu_features *f = modattn__cpu_get();
    return f->avx512f && f->fma ? "avx512" : f->avx2 && f->fma ? "avx2" : f->neon ? "neon" : "scalar";
}
#endif
