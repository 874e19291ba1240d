/* tests/backends/test_kernel_twins.c — sanitizer builds only: the hot kernels' uninstrumented twins
 * (core/internal_core.h: kernel twins; MODATTN_ASAN_KERNELS). Each case runs in a child process of
 * this program with MODATTN_ASAN_KERNELS set, its output read back:
 *   - select: with full the library runs the instrumented kernels, with entry the twins (cpu_flash's
 *     ISA is the twin's table; our AVX2 GEMM is told by the overflow case below);
 *   - sums: our AVX2 GEMM (K over two slices, row and column tails), the row kernels' direct GEMM
 *     and LayerNorm, and cpu_flash attention (causal, a mask, row tails, two threads) give the same
 *     bits in both modes;
 *   - overrun: an output buffer one float shorter than the call's shape is reported by ASan in both
 *     modes: in full mode by the kernel's own instrumented store, in entry mode by the entry check,
 *     which names the operand ("sgemm: C", "cpu_flash: o") before the twin could write anything.
 * That the twins' objects carry no ASan checks and the others do is kernel_twins_built's part
 * (check_twins.sh, nm). */
#define _GNU_SOURCE
#include "modattn/modattn.h"
#include "backends/cpu/cpu_internal.h"
#include "backends/cpu_flash/flash.h"
#include "core/internal_core.h"
#include "test_util.h"

#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static float val(size_t i, unsigned salt) { return (float)(((i + salt) * 2654435761u) % 2001) / 1000.0f - 1.0f; }

/* our GEMM: C[M, N) = A[M, K] W[N, K]^T with ldc > N; short: C one float short of what the call writes */
static int run_sgemm(bool shorter) {
    const int64_t M = 37, N = 40, K = 600, lda = 611, ldc = 45;
    float *W = malloc((size_t)(N * K) * sizeof(float)), *A = malloc((size_t)(M * lda) * sizeof(float));
    float *Wp = aligned_alloc(64, modattn__sgemm_packed_bytes(N, K));
    float *scr = aligned_alloc(64, modattn__sgemm_scratch_bytes(K));
    const size_t cn = (size_t)((M - 1) * ldc + N) - (shorter ? 1 : 0);
    float *C = calloc(cn, sizeof(float));
    if (!W || !A || !Wp || !scr || !C) return 2;
    for (int64_t i = 0; i < N * K; i++) W[i] = val((size_t)i, 1);
    for (int64_t i = 0; i < M * lda; i++) A[i] = val((size_t)i, 2);
    modattn__sgemm_pack(W, N, K, Wp);
    if (modattn__sgemm_run(Wp, N, K, M, A, lda, C, ldc, 0, N, false, scr) != 0) return 3;
    printf("sgemm %016llx\n", (unsigned long long)fnv(C, cn * sizeof(float)));
    free(W), free(A), free(Wp), free(scr), free(C);
    return 0;
}

/* the row kernels' direct GEMM (few-row plans) and a LayerNorm over its rows; short: C one float short */
static int run_direct(bool shorter) {
    const int64_t M = 5, N = 37, K = 83, lda = 90, ldc = 41;
    float *W = malloc((size_t)(N * K) * sizeof(float)), *A = malloc((size_t)(M * lda) * sizeof(float));
    float *g = malloc((size_t)N * sizeof(float)), *b = malloc((size_t)N * sizeof(float));
    const size_t cn = (size_t)((M - 1) * ldc + N) - (shorter ? 1 : 0);
    float *C = calloc(cn, sizeof(float));
    if (!W || !A || !g || !b || !C) return 2;
    for (int64_t i = 0; i < N * K; i++) W[i] = val((size_t)i, 6);
    for (int64_t i = 0; i < M * lda; i++) A[i] = val((size_t)i, 7);
    for (int64_t i = 0; i < N; i++) g[i] = 1.0f + val((size_t)i, 8), b[i] = val((size_t)i, 9);
    modattn__gemm_direct(M, N, K, A, lda, W, 0.0f, C, ldc);
    for (int64_t r = 0; r < M && !shorter; r++) modattn__bias_layer_norm(C + r * ldc, NULL, g, b, N, 1e-12);
    printf("direct %016llx\n", (unsigned long long)fnv(C, cn * sizeof(float)));
    free(W), free(A), free(g), free(b), free(C);
    return 0;
}

/* cpu_flash: [2, 3, 45, 40] causal with a [1, 1, 45, 45] mask on two threads; short: o one float short */
static int run_flash(bool shorter) {
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    modattn_ctx *ctx = NULL;
    if (modattn_ctx_create(&o, &ctx) != 0) return 2;
    const long idx = modattn_ctx_find(ctx, "cpu_flash");
    const int64_t B = 2, H = 3, S = 45, D = 40;
    const size_t n = (size_t)(B * H * S * D), on = n - (shorter ? 1 : 0);
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *out = calloc(on, 4);
    float *mask = malloc((size_t)(S * S) * 4);
    if (idx < 0 || !q || !k || !v || !out || !mask) return 3;
    for (size_t i = 0; i < n; i++) q[i] = val(i, 3), k[i] = val(i, 4), v[i] = val(i, 5);
    for (int64_t i = 0; i < S * S; i++) mask[i] = (i % 7 == 3) ? -1e9f : 0.0f;
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
    c.o = modattn_tensor_contiguous(out, MODATTN_DTYPE_F32, B, H, S, D);
    c.mask = modattn_tensor_contiguous(mask, MODATTN_DTYPE_F32, 1, 1, S, S);
    c.causal = true;
    const int st = modattn_attention_with(ctx, (size_t)idx, &c);
    if (st != 0) {
        fprintf(stderr, "cpu_flash: %s\n", modattn_last_error());
        return 4;
    }
    printf("flash %016llx\n", (unsigned long long)fnv(out, on * sizeof(float)));
    free(q), free(k), free(v), free(out), free(mask);
    modattn_ctx_free(ctx);
    return 0;
}

static int child(const char *what) {
    if (strcmp(what, "select") == 0) {
        const flash_isa *isa = modattn__flash_isa_select(), *twin = NULL;
        if (strcmp(isa->name, "avx512") == 0) twin = modattn__flash_isa_avx512_unchecked();
        else if (strcmp(isa->name, "avx2") == 0) twin = modattn__flash_isa_avx2_unchecked();
        printf("twins %d flash %s %s\n", (int)modattn__kernel_twins_on(), isa->name, isa == twin ? "twin" : "checked");
        return 0;
    }
    if (strcmp(what, "sums") == 0) {
        int st = run_sgemm(false);
        if (!st) st = run_direct(false);
        return st ? st : run_flash(false);
    }
    if (strcmp(what, "sgemm-short") == 0) return run_sgemm(true);
    if (strcmp(what, "direct-short") == 0) return run_direct(true);
    if (strcmp(what, "flash-short") == 0) return run_flash(true);
    return 9;
}

/* runs this program's case `what` with MODATTN_ASAN_KERNELS=mode: its stdout and stderr into out,
 * the wait status into *status */
static void run_child(const char *self, const char *mode, const char *what, char *out, size_t cap, int *status) {
    int fd[2];
    out[0] = 0;
    *status = -1;
    if (pipe(fd) != 0) return;
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1), dup2(fd[1], 2);
        setenv("MODATTN_ASAN_KERNELS", mode, 1);
        execl(self, self, "child", what, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fd[0], out + len, cap - 1 - len)) > 0 && len + (size_t)r < cap - 1) len += (size_t)r;
    if (r > 0) len += (size_t)r;
    out[len] = 0;
    close(fd[0]);
    if (pid > 0) waitpid(pid, status, 0);
}

/* ASan's report of an access past the end of a heap block (a store of 32 bytes that starts inside
 * it is an "unknown-crash"; the block is named the same way either way) */
static bool overrun(const char *out) {
    return strstr(out, "ERROR: AddressSanitizer: ") && strstr(out, "bytes to the right of") && strstr(out, "-byte region");
}

static const char *line_of(const char *out, const char *prefix) {
    const char *p = strstr(out, prefix);
    return p ? p : "(none)";
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
#ifndef MODATTN_KERNEL_TWINS
    printf("test_kernel_twins: not available here: this build has no kernel twins (only MODATTN_SANITIZE builds do)\n");
    return 77;
#else
    char reason[256];
    if (!modattn__sgemm_available(reason, sizeof reason)) {
        printf("test_kernel_twins: not available here: %s (the twins are the AVX2 and AVX-512 kernels')\n", reason);
        return 77;
    }
    static char out[1 << 16], out2[1 << 16];
    int st, st2;
    char self[4096];
    const ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(sl > 0);
    if (sl <= 0) return test_finish("test_kernel_twins");
    self[sl] = 0;

    run_child(self, "full", "select", out, sizeof out, &st);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "twins 0 flash avx") && strstr(out, " checked"),
              "full: %s", out);
    run_child(self, "entry", "select", out, sizeof out, &st);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "twins 1 flash avx") && strstr(out, " twin\n"),
              "entry: %s", out);

    run_child(self, "full", "sums", out, sizeof out, &st);
    run_child(self, "entry", "sums", out2, sizeof out2, &st2);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0 && WIFEXITED(st2) && WEXITSTATUS(st2) == 0, "full: %s\nentry: %s",
              out, out2);
    const char *s1 = line_of(out, "sgemm "), *s2 = line_of(out2, "sgemm ");
    CHECK_MSG(strncmp(s1, s2, 23) == 0 && strncmp(s1, "sgemm ", 6) == 0, "our GEMM: full %.22s, entry %.22s", s1, s2);
    const char *f1 = line_of(out, "flash "), *f2 = line_of(out2, "flash ");
    CHECK_MSG(strncmp(f1, f2, 23) == 0 && strncmp(f1, "flash ", 6) == 0, "cpu_flash: full %.22s, entry %.22s", f1, f2);
    const char *d1 = line_of(out, "direct "), *d2 = line_of(out2, "direct ");
    CHECK_MSG(strncmp(d1, d2, 24) == 0 && strncmp(d1, "direct ", 7) == 0, "direct GEMM: full %.23s, entry %.23s", d1, d2);
    printf("same bits in both modes: %.22s, %.23s, %.22s\n", s1, d1, f1);

    static const struct { const char *what, *operand; } cases[] = {{"sgemm-short", "modattn: sgemm: C:"},
                                                                   {"direct-short", "modattn: direct GEMM: C:"},
                                                                   {"flash-short", "modattn: cpu_flash: o:"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_child(self, "full", cases[i].what, out, sizeof out, &st);
        CHECK_MSG(!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && overrun(out) && !strstr(out, cases[i].operand),
                  "%s, full: the kernel's own check should report it:\n%s", cases[i].what, out);
        run_child(self, "entry", cases[i].what, out, sizeof out, &st);
        CHECK_MSG(!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && strstr(out, cases[i].operand) && overrun(out),
                  "%s, entry: the entry check should report it, naming %s:\n%s", cases[i].what, cases[i].operand, out);
        printf("%s: reported in both modes (entry: %.60s...)\n", cases[i].what, line_of(out, cases[i].operand));
    }
    return test_finish("test_kernel_twins");
#endif
}
