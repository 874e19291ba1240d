/* tests/core/test_process_state.c — the library leaves the process as it found it (issue 17): a
 * program that embeds modattn next to other users of SQLite and OpenMP (Python with its sqlite3
 * module and numpy) must not find their settings changed behind its back.
 *
 *  - SQLite's global allocator is only replaced on request (modattn__store_account_sqlite_memory),
 *    and the request fails with a message, changing nothing, once SQLite is in use;
 *  - the oneDNN GEMMs set OpenMP's thread count of the calling thread to 1 while they run and put
 *    the caller's own setting back;
 *  - forcing a cpu_flash kernel (a test and benchmark knob) acts on the forcing thread only. */
#include "backends/cpu/cpu_internal.h"
#include "backends/cpu_flash/flash.h"
#include "modattn/modattn.h"
#include "modattn/store.h"
#include "attn/internal_dispatch.h"
#include "pipeline/internal_store.h"
#include "test_util.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* OpenMP's entry points, weak: present in the default (oneDNN) build, absent with OpenBLAS. */
extern int omp_get_max_threads(void) __attribute__((weak));
extern void omp_set_num_threads(int n) __attribute__((weak));

static char g_dir[] = "/tmp/modattn-process-state-XXXXXX";

static int64_t other_bytes(void) {
    modattn_mem_stats st;
    modattn_mem_get_stats(&st);
    return st.current[MODATTN_MEM_OTHER];
}

/* In a child process (SQLite's configuration is per process): open a store without and with the
 * opt-in, and see where SQLite's memory went. Exit status: 0 when all checks passed. */
static int child_sqlite(int opt_in) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.db", g_dir, opt_in ? "counted" : "not-counted");
    if (opt_in && modattn__store_account_sqlite_memory() != 0) {
        fprintf(stderr, "opt-in failed: %s\n", modattn_last_error());
        return 10;
    }
    const int64_t before = other_bytes();
    modattn_store *s = NULL;
    if (modattn_store_open(path, MODATTN_STORE_CREATE, &s) != 0) {
        fprintf(stderr, "store open failed: %s\n", modattn_last_error());
        return 11;
    }
    const int64_t during = other_bytes();
    const sqlite3_int64 sqlite_used = sqlite3_memory_used();
    int bad = 0;
    if (opt_in) {
        /* SQLite's bytes are modattn's "other" bytes now (its page cache, schema, statements) */
        if (during - before < 64 * 1024) {
            fprintf(stderr, "opt-in: SQLite's memory is not counted (other grew by %lld bytes)\n",
                    (long long)(during - before));
            bad = 12;
        }
    } else {
        /* SQLite allocates with its own allocator; modattn's store object alone is counted */
        if (sqlite_used <= 0 || during - before > 16 * 1024) {
            fprintf(stderr, "no opt-in: SQLite used %lld bytes, modattn's 'other' grew by %lld\n",
                    (long long)sqlite_used, (long long)(during - before));
            bad = 13;
        }
        /* too late now: SQLite is initialised; the call says so and changes nothing */
        int st = modattn__store_account_sqlite_memory();
        if (st != MODATTN_EUNSUPPORTED || !strstr(modattn_last_error(), "initialised")) {
            fprintf(stderr, "late opt-in: status %d, message '%s'\n", st, modattn_last_error());
            bad = 14;
        }
        if (modattn__store_account_sqlite_memory() != MODATTN_EUNSUPPORTED) bad = 15; /* and again */
    }
    modattn_store_close(s);
    return bad;
}

static void test_sqlite(void) {
    for (int opt_in = 0; opt_in < 2; opt_in++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) _exit(child_sqlite(opt_in));
        int ws = 0;
        CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
        CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "sqlite %s: child status %d",
                  opt_in ? "opt-in" : "default", ws);
    }
}

static void test_openmp(void) {
    if (!omp_get_max_threads || !omp_set_num_threads) {
        printf("openmp: not linked in this build (GEMM library %s): nothing to restore\n",
               modattn__gemm_name());
        CHECK(strcmp(modattn__gemm_name(), "onednn") != 0); /* the oneDNN build must link it */
        return;
    }
    omp_set_num_threads(3);
    const int64_t M = 64, N = 48, K = 40;
    float *a = calloc((size_t)(M * K), 4), *w = calloc((size_t)(N * K), 4), *c = calloc((size_t)(M * N), 4);
    for (int64_t i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 3.0f;
    for (int64_t i = 0; i < N * K; i++) w[i] = (float)(i % 5) - 2.0f;
    modattn__sgemm_nt(M, N, K, 1.0f, a, K, w, K, 0.0f, c, N);
    CHECK_MSG(omp_get_max_threads() == 3, "sgemm left OpenMP at %d threads", omp_get_max_threads());
    float want = 0; /* one element checked: the call really ran */
    for (int64_t k = 0; k < K; k++) want += a[5 * K + k] * w[7 * K + k];
    CHECK(c[5 * N + 7] == want);
    modattn__gemm_plan *plan = NULL;
    CHECK(modattn__gemm_plan_create(w, N, K, K, N, false, MODATTN_PRECISION_FP32, NULL, NULL, &plan) == 0);
    CHECK_MSG(omp_get_max_threads() == 3, "plan creation left OpenMP at %d threads", omp_get_max_threads());
    if (plan) {
        void *scratch = aligned_alloc(64, (modattn__gemm_plan_scratch(plan) + 64) / 64 * 64);
        memset(c, 0, (size_t)(M * N) * 4);
        CHECK(modattn__gemm_plan_run(plan, a, c, scratch) == 0);
        CHECK_MSG(omp_get_max_threads() == 3, "plan run left OpenMP at %d threads", omp_get_max_threads());
        CHECK(c[5 * N + 7] == want);
        free(scratch);
        modattn__gemm_plan_free(plan);
    }
    free(a), free(w), free(c);
}

typedef struct {
    const modattn_attn_impl *impl;
    const char *seen;
} isa_probe;

static void *probe_isa(void *arg) {
    isa_probe *p = arg;
    p->seen = NULL;
    (void)p->impl->control(p->impl->ctx, MODATTN_CPU_FLASH_CTL_ISA_NAME, &p->seen);
    return NULL;
}

static void test_forced_isa(void) {
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(NULL, &ctx) == 0);
    long idx = ctx ? modattn_ctx_find(ctx, "cpu_flash") : -1;
    CHECK(idx >= 0);
    if (idx < 0) {
        modattn_ctx_free(ctx);
        return;
    }
    isa_probe p = {modattn__ctx_impl(ctx, (size_t)idx), NULL};
    probe_isa(&p);
    const char *auto_isa = p.seen;
    CHECK(auto_isa != NULL);
    CHECK(p.impl->control(p.impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, (void *)"scalar") == 0);
    probe_isa(&p);
    CHECK(p.seen && strcmp(p.seen, "scalar") == 0); /* this thread: forced */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, probe_isa, &p) == 0);
    pthread_join(t, NULL);
    CHECK_MSG(p.seen && auto_isa && strcmp(p.seen, auto_isa) == 0, "another thread runs %s, not %s",
              p.seen ? p.seen : "?", auto_isa ? auto_isa : "?");
    CHECK(p.impl->control(p.impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, NULL) == 0);
    probe_isa(&p);
    CHECK(p.seen && auto_isa && strcmp(p.seen, auto_isa) == 0);
    modattn_ctx_free(ctx);
}

int main(void) {
    if (!mkdtemp(g_dir)) return 2;
    test_sqlite();
    test_openmp();
    test_forced_isa();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_finish("test_process_state");
}
