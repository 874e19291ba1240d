/* core/cpu.c — CPU feature detection (CPUID + XGETBV on x86, compile-time on ARM), and the names of
 * the precisions (modattn_precision). */
#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

static modattn_cpu_features g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool disabled(const char *list, const char *name) {
    if (!list) return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0) return true; /* any case, as the env check */
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static void detect(void) {
    modattn_cpu_features f;
    memset(&f, 0, sizeof f);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        f.sse2 = (d >> 26) & 1;
        bool osxsave = (c >> 27) & 1;
        bool avx_hw = (c >> 28) & 1;
        f.fma = (c >> 12) & 1;
        f.f16c = (c >> 29) & 1;
        uint64_t xcr0 = osxsave ? xgetbv0() : 0;
        bool ymm_ok = (xcr0 & 0x6) == 0x6;
        bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
        f.avx = avx_hw && ymm_ok;
        if (!f.avx) f.fma = f.f16c = false;
        if (__get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, a, b, c, d);
            f.avx2 = f.avx && ((b >> 5) & 1);
            if (zmm_ok) {
                f.avx512f = (b >> 16) & 1;
                f.avx512dq = f.avx512f && ((b >> 17) & 1);
                f.avx512bw = f.avx512f && ((b >> 30) & 1);
                f.avx512vl = f.avx512f && ((b >> 31) & 1);
                f.avx512_fp16 = f.avx512f && ((d >> 23) & 1);
                f.avx512_vnni = f.avx512f && ((c >> 11) & 1);
                /* AMX: the tiles' state saved by the OS too (XCR0 bits 17, 18) */
                const bool tiles = (xcr0 & 0x60000) == 0x60000 && ((d >> 24) & 1);
                f.amx_bf16 = tiles && ((d >> 22) & 1);
                f.amx_int8 = tiles && ((d >> 25) & 1);
                __cpuid_count(7, 1, a, b, c, d);
                f.avx512_bf16 = f.avx512f && ((a >> 5) & 1);
            }
        }
    }
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        unsigned r[12];
        for (unsigned k = 0; k < 3; k++) __get_cpuid(0x80000002u + k, &r[4 * k], &r[4 * k + 1], &r[4 * k + 2], &r[4 * k + 3]);
        memcpy(f.model_name, r, 48);
        f.model_name[48] = '\0';
    }
#elif defined(__aarch64__)
    f.neon = true;
#endif
    { /* trim the padding CPUID leaves */
        char *s = f.model_name;
        while (*s == ' ') memmove(s, s + 1, strlen(s));
        size_t n = strlen(s);
        while (n && s[n - 1] == ' ') s[--n] = '\0';
        if (!n) snprintf(f.model_name, sizeof f.model_name, "unknown");
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    f.logical_cpus = n > 0 ? (int)n : 1;
    const char *off = getenv("MODATTN_CPU_DISABLE");
    if (disabled(off, "avx512f") || disabled(off, "avx512")) {
        f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.avx512_fp16 = f.avx512_vnni = false;
        f.amx_bf16 = f.amx_int8 = false;
    }
    if (disabled(off, "avx512_bf16")) f.avx512_bf16 = f.amx_bf16 = false;
    if (disabled(off, "avx512_vnni")) f.avx512_vnni = f.amx_int8 = false;
    if (disabled(off, "amx")) f.amx_bf16 = f.amx_int8 = false;
    if (disabled(off, "avx2")) f.avx2 = false;
    if (disabled(off, "fma")) f.fma = false;
    if (disabled(off, "avx")) f.avx = f.avx2 = f.fma = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq =
        f.avx512_bf16 = f.avx512_fp16 = f.avx512_vnni = f.amx_bf16 = f.amx_int8 = false;
    if (disabled(off, "neon")) f.neon = false;
    g_cpu = f;
}

const modattn_cpu_features *modattn__cpu_get(void) {
    pthread_once(&g_once, detect);
    return &g_cpu;
}

void modattn__cpu_describe(char *buf, size_t len) {
    const modattn_cpu_features *f = modattn__cpu_get();
    size_t used = 0;
    buf[0] = '\0';
#define ADD(flag, text)                                                          \
    if (f->flag && used < len) {                                                \
        int k = snprintf(buf + used, len - used, "%s%s", used ? " " : "", text); \
        if (k > 0) used += (size_t)k;                                           \
    }
    ADD(sse2, "sse2") ADD(avx, "avx") ADD(avx2, "avx2") ADD(fma, "fma") ADD(f16c, "f16c")
    ADD(avx512f, "avx512f") ADD(avx512bw, "avx512bw") ADD(avx512vl, "avx512vl")
    ADD(avx512dq, "avx512dq") ADD(avx512_bf16, "avx512_bf16") ADD(avx512_fp16, "avx512_fp16")
    ADD(avx512_vnni, "avx512_vnni") ADD(amx_bf16, "amx_bf16") ADD(amx_int8, "amx_int8")
    ADD(neon, "neon")
#undef ADD
    if (used >= len && len) buf[len - 1] = '\0';
}

/* ---------------------------------------------------------------- precision */

const char *modattn_precision_name(modattn_precision p) {
    switch (p) {
    case MODATTN_PRECISION_FP32: return "fp32";
    case MODATTN_PRECISION_BF16: return "bf16";
    case MODATTN_PRECISION_INT8: return "int8";
    case MODATTN_PRECISION_BF16X3: return "bf16x3";
    }
    return "?";
}

int modattn_precision_parse(const char *text, modattn_precision *out) {
    static const struct { const char *name; modattn_precision p; } k[] = {
        {"fp32", MODATTN_PRECISION_FP32}, {"float32", MODATTN_PRECISION_FP32},
        {"bf16", MODATTN_PRECISION_BF16}, {"bfloat16", MODATTN_PRECISION_BF16}, {"int8", MODATTN_PRECISION_INT8},
        {"bf16x3", MODATTN_PRECISION_BF16X3}};
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_precision_parse: out is NULL");
    if (!text || !*text) {
        *out = MODATTN_PRECISION_FP32;
        return 0;
    }
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (strcasecmp(text, k[i].name) == 0) {
            *out = k[i].p;
            return 0;
        }
    char shown[40];
    snprintf(shown, sizeof shown, "%.32s%s", text, strlen(text) > 32 ? "..." : "");
    for (char *c = shown; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    return modattn__error(MODATTN_EINVAL, "unknown precision '%s' (choose fp32, bf16x3, bf16 or int8)", shown);
}
