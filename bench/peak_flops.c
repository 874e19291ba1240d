/* bench/peak_flops.c — peak arithmetic throughput probe, per core and on all cores: fp32 FMA by
 * default, or one of the low-precision instruction classes the embed benchmark's modes use.
 *
 * Each thread runs 16 independent accumulator chains of vfmadd (a = a * m + c), all in registers,
 * each started from a distinct value (identical chains can be merged by the compiler, an array
 * of accumulators in memory measures the load/store path instead). 16 chains cover the FMA
 * latency x throughput product of current cores (4 cycles x 2 ports x 2 for Zen 4's double-pumped
 * AVX-512 is well inside). m and c keep the values bounded (m < 1), so no denormals or infinities.
 * The widest ISA the CPU reports is chosen at run time (AVX-512F, else AVX2+FMA, else scalar C).
 *
 *   peak_flops [seconds_per_run=0.3] [threads=all CPUs] [CLASS]
 * CLASS: avx512|avx2|scalar (fp32 FMA, forcing a narrower ISA), or
 *   bf16dot   AVX512_BF16 VDPBF16PS: 16 lanes x 2 products = 64 FLOPs an instruction
 *   int8dot   AVX512_VNNI VPDPBUSD: 16 lanes x 4 products = 128 ops
 *   amx_bf16  AMX TDPBF16PS on 16x32 . 32x16 tiles: 16384 FLOPs
 *   amx_int8  AMX TDPBSSD on 16x64 . 64x16 tiles: 32768 ops
 * (each with 16 or, for AMX, 4 independent accumulators), exit 3 with a line saying so when the CPU
 * lacks it. FLOPs: 2 per lane per FMA. Prints one line per measurement and a JSON summary line. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#define PEAK_X86 1
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: on a shared machine the wall clock also counts the time other
 * processes held the core; both are reported. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each kernel runs `iters` iterations of 16 FMAs per lane-vector and returns a value that depends
 * on every chain (so nothing is dead code). */
#ifdef PEAK_X86
__attribute__((target("avx512f"))) static float kern_avx512(int64_t iters, float seed) {
    __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(seed + 0.01f), a1 = _mm512_set1_ps(seed + 0.02f), a2 = _mm512_set1_ps(seed + 0.03f),
           a3 = _mm512_set1_ps(seed + 0.04f), a4 = _mm512_set1_ps(seed + 0.05f), a5 = _mm512_set1_ps(seed + 0.06f),
           a6 = _mm512_set1_ps(seed + 0.07f), a7 = _mm512_set1_ps(seed + 0.08f), a8 = _mm512_set1_ps(seed + 0.09f),
           a9 = _mm512_set1_ps(seed + 0.10f), aa = _mm512_set1_ps(seed + 0.11f), ab = _mm512_set1_ps(seed + 0.12f),
           ac = _mm512_set1_ps(seed + 0.13f), ad = _mm512_set1_ps(seed + 0.14f), ae = _mm512_set1_ps(seed + 0.15f),
           af = _mm512_set1_ps(seed + 0.16f);
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c), a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c), a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c), a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c), aa = _mm512_fmadd_ps(aa, m, c), ab = _mm512_fmadd_ps(ab, m, c);
        ac = _mm512_fmadd_ps(ac, m, c), ad = _mm512_fmadd_ps(ad, m, c), ae = _mm512_fmadd_ps(ae, m, c);
        af = _mm512_fmadd_ps(af, m, c);
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));
        __asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(aa), "+v"(ab), "+v"(ac), "+v"(ad), "+v"(ae), "+v"(af));
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(aa, ab)),
                                       _mm512_add_ps(_mm512_add_ps(ac, ad), _mm512_add_ps(ae, af))));
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float kern_avx2(int64_t iters, float seed) {
    __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(seed + 0.01f), a1 = _mm256_set1_ps(seed + 0.02f), a2 = _mm256_set1_ps(seed + 0.03f),
           a3 = _mm256_set1_ps(seed + 0.04f), a4 = _mm256_set1_ps(seed + 0.05f), a5 = _mm256_set1_ps(seed + 0.06f),
           a6 = _mm256_set1_ps(seed + 0.07f), a7 = _mm256_set1_ps(seed + 0.08f), a8 = _mm256_set1_ps(seed + 0.09f),
           a9 = _mm256_set1_ps(seed + 0.10f), aa = _mm256_set1_ps(seed + 0.11f), ab = _mm256_set1_ps(seed + 0.12f),
           ac = _mm256_set1_ps(seed + 0.13f), ad = _mm256_set1_ps(seed + 0.14f);
    /* 14 chains: with m and c that is all 16 ymm registers */
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c), a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c), a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c), a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c), aa = _mm256_fmadd_ps(aa, m, c), ab = _mm256_fmadd_ps(ab, m, c);
        ac = _mm256_fmadd_ps(ac, m, c), ad = _mm256_fmadd_ps(ad, m, c);
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6));
        __asm__ volatile("" : "+x"(a7), "+x"(a8), "+x"(a9), "+x"(aa), "+x"(ab), "+x"(ac), "+x"(ad));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(aa, ab)),
                                       _mm256_add_ps(ac, ad)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
#endif

#ifdef PEAK_X86
/* 16 accumulator chains of a dot-product instruction; a and b constant. */
#define DOT16(OP)                                                                                  \
    a0 = OP(a0, x, y), a1 = OP(a1, x, y), a2 = OP(a2, x, y), a3 = OP(a3, x, y), a4 = OP(a4, x, y), \
    a5 = OP(a5, x, y), a6 = OP(a6, x, y), a7 = OP(a7, x, y), a8 = OP(a8, x, y), a9 = OP(a9, x, y), \
    aa = OP(aa, x, y), ab = OP(ab, x, y), ac = OP(ac, x, y), ad = OP(ad, x, y), ae = OP(ae, x, y), \
    af = OP(af, x, y);                                                                             \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7)); \
    __asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(aa), "+v"(ab), "+v"(ac), "+v"(ad), "+v"(ae), "+v"(af))

__attribute__((target("avx512f,avx512bf16"))) static float kern_bf16dot(int64_t iters, float seed) {
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(seed * 1e-4f));
    const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
    __m512 a0 = _mm512_set1_ps(seed), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
           a9 = a0, aa = a0, ab = a0, ac = a0, ad = a0, ae = a0, af = a0;
    for (int64_t i = 0; i < iters; i++) {
        DOT16(_mm512_dpbf16_ps);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(aa, ab)),
                                       _mm512_add_ps(_mm512_add_ps(ac, ad), _mm512_add_ps(ae, af))));
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"))) static float kern_int8dot(int64_t iters, float seed) {
    const __m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(1); /* int32 sums wrap: defined, no trap */
    __m512i a0 = _mm512_set1_epi32((int)(seed * 100)), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0, aa = a0, ab = a0, ac = a0, ad = a0, ae = a0, af = a0;
    for (int64_t i = 0; i < iters; i++) {
        DOT16(_mm512_dpbusd_epi32);
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(aa, ab)),
                                             _mm512_add_epi32(_mm512_add_epi32(ac, ad), _mm512_add_epi32(ae, af))));
    return (float)_mm512_reduce_add_epi32(s);
}
#undef DOT16

/* AMX: tiles 0-3 accumulate (16 rows x 64 bytes), 4-5 hold A, 6-7 B; the OS must grant the tile
 * state first (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). */
typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;
static int amx_permit(void) {
    return (int)syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
}
static void amx_config(void) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}
/* the configuration, accumulators 0-3 zeroed, sources 4-7 loaded from src (16 rows of 64 bytes) */
__attribute__((target("amx-tile"))) static inline void amx_start(const void *src) {
    amx_config();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, src, 64);
    _tile_loadd(5, src, 64);
    _tile_loadd(6, src, 64);
    _tile_loadd(7, src, 64);
}
__attribute__((target("amx-tile,amx-bf16"))) static float kern_amx_bf16(int64_t iters, float seed) {
    static uint16_t src[16 * 32] __attribute__((aligned(64)));
    float acc[16 * 16] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) src[i] = 0x3800; /* bf16 2^-15 */
    amx_start(src);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, acc, 64);
    _tile_release();
    return acc[0] + seed;
}
__attribute__((target("amx-tile,amx-int8"))) static float kern_amx_int8(int64_t iters, float seed) {
    static int8_t src[16 * 64] __attribute__((aligned(64)));
    int32_t acc[16 * 16] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 64; i++) src[i] = 1;
    amx_start(src);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_stored(0, acc, 64);
    _tile_release();
    return (float)acc[0] + seed;
}
#endif

static float kern_scalar(int64_t iters, float seed) {
    float a[12];
    for (int k = 0; k < 12; k++) a[k] = seed + 0.01f * (float)(k + 1);
    for (int64_t i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++) a[k] = a[k] * 0.999999f + 1e-7f;
    float s = 0;
    for (int k = 0; k < 12; k++) s += a[k];
    return s;
}

typedef struct probe {
    const char *isa;
    float (*fn)(int64_t, float);
    double flops_per_iter;
} probe;

static probe pick(const char *want) {
    if (want && !strcmp(want, "scalar")) return (probe){"scalar", kern_scalar, 12.0 * 2};
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (want && (!strcmp(want, "bf16dot") || !strcmp(want, "int8dot") || !strncmp(want, "amx_", 4))) {
        unsigned a, b, c, d;
        __cpuid_count(7, 0, a, b, c, d);
        const bool amx = ((d >> 24) & 1) && amx_permit() == 0;
        if (!strcmp(want, "int8dot") && ((c >> 11) & 1) && __builtin_cpu_supports("avx512f"))
            return (probe){"int8dot (VPDPBUSD)", kern_int8dot, 16.0 * 16 * 4 * 2};
        if (!strcmp(want, "amx_bf16") && amx && ((d >> 22) & 1))
            return (probe){"amx_bf16 (TDPBF16PS)", kern_amx_bf16, 4.0 * 16 * 16 * 32 * 2};
        if (!strcmp(want, "amx_int8") && amx && ((d >> 25) & 1))
            return (probe){"amx_int8 (TDPBSSD)", kern_amx_int8, 4.0 * 16 * 16 * 64 * 2};
        if (!strcmp(want, "bf16dot")) {
            __cpuid_count(7, 1, a, b, c, d);
            if (((a >> 5) & 1) && __builtin_cpu_supports("avx512f"))
                return (probe){"bf16dot (VDPBF16PS)", kern_bf16dot, 16.0 * 16 * 2 * 2};
        }
        printf("{\"class\": \"%s\", \"available\": false}\n", want);
        fprintf(stderr, "peak_flops: this CPU does not have %s\n", want);
        exit(3);
    }
    if (want && !strcmp(want, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (probe){"avx2+fma", kern_avx2, 14.0 * 8 * 2};
    if (__builtin_cpu_supports("avx512f")) return (probe){"avx512f", kern_avx512, 16.0 * 16 * 2};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (probe){"avx2+fma", kern_avx2, 14.0 * 8 * 2};
#endif
    return (probe){"scalar", kern_scalar, 12.0 * 2};
}

typedef struct worker {
    probe p;
    int64_t iters;
    double seconds, cpu_seconds;
    float sink;
    pthread_barrier_t *bar;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->bar);
    double t0 = now_s(), c0 = cpu_s();
    w->sink = w->p.fn(w->iters, w->sink);
    w->seconds = now_s() - t0;
    w->cpu_seconds = cpu_s() - c0;
    return NULL;
}

static void sort5(double *v) {
    for (int a = 1; a < 5; a++)
        for (int b = a; b > 0 && v[b] < v[b - 1]; b--) {
            double t = v[b];
            v[b] = v[b - 1], v[b - 1] = t;
        }
}

/* n threads each running `iters` iterations, 5 times: median total GFLOP/s by the wall clock
 * (slowest thread) and by CPU time (sum of per-thread rates). */
static void run(probe p, int n, int64_t iters, double *wall_gf, double *cpu_gf) {
    double wall[5], cpu[5];
    for (int rep = 0; rep < 5; rep++) {
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)n);
        worker *w = calloc((size_t)n, sizeof *w);
        pthread_t *th = calloc((size_t)n, sizeof *th);
        for (int i = 0; i < n; i++) {
            w[i] = (worker){p, iters, 0, 0, 0.5f + 0.001f * (float)i, &bar};
            if (i) pthread_create(&th[i], NULL, work, &w[i]);
        }
        work(&w[0]);
        for (int i = 1; i < n; i++) pthread_join(th[i], NULL);
        double slowest = 0, sum = 0;
        for (int i = 0; i < n; i++) {
            if (w[i].seconds > slowest) slowest = w[i].seconds;
            sum += p.flops_per_iter * (double)iters / w[i].cpu_seconds * 1e-9;
        }
        wall[rep] = p.flops_per_iter * (double)iters * n / slowest * 1e-9;
        cpu[rep] = sum;
        if (w[0].sink == 12345.0f) printf("!"); /* keep the results alive */
        free(w), free(th);
        pthread_barrier_destroy(&bar);
    }
    sort5(wall), sort5(cpu);
    *wall_gf = wall[2], *cpu_gf = cpu[2];
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = argc > 2 ? atoi(argv[2]) : (int)(ncpu > 0 ? ncpu : 1);
    if (secs <= 0) secs = 0.3;
    if (nthreads < 1) nthreads = 1;
    probe p = pick(argc > 3 ? argv[3] : NULL);
    /* calibrate: iterations for ~secs on one thread */
    int64_t iters = 1 << 20;
    for (;;) {
        double t0 = now_s();
        volatile float s = p.fn(iters, 0.5f);
        (void)s;
        double dt = now_s() - t0;
        if (dt > 0.05 || iters > ((int64_t)1 << 40)) {
            iters = (int64_t)((double)iters * secs / (dt > 1e-9 ? dt : 1e-9));
            break;
        }
        iters *= 4;
    }
    if (iters < 1) iters = 1;
    /* every thread of an AMX probe needs the OS's grant: it is per process, asked above */
    double one, one_cpu, all, all_cpu;
    run(p, 1, iters, &one, &one_cpu);
    run(p, nthreads, iters, &all, &all_cpu);
    printf("isa %s\n", p.isa);
    printf("  1 thread:  %7.1f GFLOP/s wall clock, %7.1f GFLOP/s per CPU-second\n", one, one_cpu);
    printf("  %d threads: %7.1f GFLOP/s wall clock, %7.1f GFLOP/s per CPU-second (%.1f per core)\n", nthreads, all,
           all_cpu, all_cpu / nthreads);
    printf("{\"isa\": \"%s\", \"gflops_1thread\": %.2f, \"gflops_1thread_cpu\": %.2f, \"threads\": %d, "
           "\"gflops_all\": %.2f, \"gflops_all_cpu\": %.2f}\n",
           p.isa, one, one_cpu, nthreads, all, all_cpu);
    return 0;
}
