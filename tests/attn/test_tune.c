/* tests/attn/test_tune.c — the tune policy: the faster implementation wins even against priority,
 * the winner is remembered in the cache file and used by `auto` in a new context, explain shows
 * the measured times, and a corrupt file, an unwritable directory and two processes writing at
 * once are all survived.
 *
 * Time is a fake clock: the test links with -Wl,--wrap=modattn__now_ns (tests/attn/CMakeLists.txt),
 * so the tuner's stopwatch (attn/tune.c, attn/run.c) reads the clock below, which only the test
 * implementations move: slow_impl's run takes 3 ms of it, fast_impl's 1 us, whatever the machine's
 * load or the sanitizers. The winner is decided by what the tuner measured, and the test says
 * exactly what that was; reversing the costs reverses the winner. */
#include "modattn/modattn.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "test_util.h"

#include <math.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

const modattn_attn_impl *modattn__backend_reference(void);

/* the fake clock: modattn__now_ns() as the library sees it */
uint64_t __wrap_modattn__now_ns(void);
static _Atomic uint64_t g_fake_ns = 1000000000ull;
static _Atomic int g_wrapped_calls;
uint64_t __wrap_modattn__now_ns(void) {
    atomic_fetch_add(&g_wrapped_calls, 1);
    return atomic_load(&g_fake_ns);
}
/* what one run of each test implementation costs on the fake clock */
static _Atomic uint64_t g_cost_slow = 3000000, g_cost_fast = 1000;

static const modattn_attn_impl *ref;
static bool t_supports(void *c, const modattn_attn_desc *d, char *r, size_t n) { (void)c; return ref->supports(NULL, d, r, n); }
static size_t t_ws(void *c, const modattn_attn_desc *d, int t) { (void)c; return ref->workspace_bytes(NULL, d, t); }
static int t_run(void *c, const modattn_attn_desc *d, const modattn_attn_call *k, void *w, size_t wb, const modattn_exec *e,
                 char *r, size_t n) {
    atomic_fetch_add(&g_fake_ns, c ? atomic_load(&g_cost_slow) : atomic_load(&g_cost_fast));
    return ref->run(NULL, d, k, w, wb, e, r, n);
}
static modattn_attn_impl slow = {MODATTN_IMPL_API_VERSION, "slow_impl", "3 ms a call on the fake clock (test)",
                                 MODATTN_DEVICE_CPU, 5, (void *)1, NULL, NULL, t_supports, t_ws, t_run, NULL};
static modattn_attn_impl fast = {MODATTN_IMPL_API_VERSION, "fast_impl", "1 us a call on the fake clock (test)",
                                 MODATTN_DEVICE_CPU, 1, NULL, NULL, NULL, t_supports, t_ws, t_run, NULL};

static modattn_ctx *open_ctx(const char *policy) {
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o = {.threads = 1, .plugin_path = "", .no_builtins = true, .policy = "auto"};
    if (modattn_ctx_create(&o, &ctx) != 0) return NULL;
    modattn_ctx_register(ctx, ref);
    modattn_ctx_register(ctx, &slow);
    modattn_ctx_register(ctx, &fast);
    if (modattn_ctx_set_policy(ctx, policy) != 0) {
        modattn_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

static float q[2 * 2 * 64 * 8], k[2 * 2 * 64 * 8], v[2 * 2 * 64 * 8], o[2 * 2 * 64 * 8];
static int run_shape(modattn_ctx *ctx, int S) {
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, 2, 2, S, 8);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, 2, 2, S, 8);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, 2, 2, S, 8);
    c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, 2, 2, S, 8);
    return modattn_attention(ctx, &c);
}

static const modattn_explain_entry *find(const modattn_explain_entry *e, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0) return &e[i];
    return NULL;
}

static char *slurp(const char *path) {
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    return buf;
}

int main(void) {
    ref = modattn__backend_reference();
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = (float)(i % 5), k[i] = (float)(i % 3), v[i] = (float)(i % 7);
    char dir[] = "/tmp/modattn_tune_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("MODATTN_CACHE_DIR", dir, 1);
    char path[256];
    snprintf(path, sizeof path, "%s/tune-v1.tsv", dir);

    /* before tuning, auto follows priority: slow_impl first */
    modattn_ctx *ctx = open_ctx("auto");
    CHECK(ctx != NULL);
    modattn_attn_desc d = modattn_attn_desc_make(2, 2, 2, 16, 16, 8, false);
    modattn_explain_entry e[8];
    size_t n;
    CHECK(modattn_explain(ctx, &d, e, 8, &n) == 0 && find(e, n, "slow_impl")->verdict == MODATTN_VERDICT_CHOSEN);
    modattn_ctx_free(ctx);

    /* tune: both priority > 0 ones are timed (not the reference), the fast one wins */
    ctx = open_ctx("tune");
    CHECK(run_shape(ctx, 16) == 0);
    modattn_impl_stats st;
    CHECK(modattn__ctx_impl_stats(ctx, (size_t)modattn_ctx_find(ctx, "reference"), &st) == 0 && st.calls == 0);
    CHECK(modattn__ctx_impl_stats(ctx, (size_t)modattn_ctx_find(ctx, "slow_impl"), &st) == 0 && st.calls == 4);
    CHECK(modattn_explain(ctx, &d, e, 8, &n) == 0);
    CHECK(g_wrapped_calls > 0); /* the tuner read the fake clock */
    /* exactly what the fake clock says each took (the file keeps 4 decimals) */
    CHECK_MSG(find(e, n, "fast_impl")->verdict == MODATTN_VERDICT_CHOSEN &&
                  fabs(find(e, n, "fast_impl")->measured_ms - 0.001) < 1e-9,
              "fast_impl: verdict %d, measured %.6f ms (want 0.001)", (int)find(e, n, "fast_impl")->verdict,
              find(e, n, "fast_impl")->measured_ms);
    CHECK_MSG(fabs(find(e, n, "slow_impl")->measured_ms - 3.0) < 1e-9 && find(e, n, "reference")->measured_ms < 0,
              "slow_impl measured %.6f ms (want 3), reference %.6f", find(e, n, "slow_impl")->measured_ms,
              find(e, n, "reference")->measured_ms);
    /* a second call of the same class does not measure again */
    CHECK(run_shape(ctx, 13) == 0); /* 13 rounds up to the same bucket as 16 */
    CHECK(modattn__ctx_impl_stats(ctx, (size_t)modattn_ctx_find(ctx, "slow_impl"), &st) == 0 && st.calls == 4);
    modattn_ctx_free(ctx);
    char *txt = slurp(path);
    CHECK(strncmp(txt, "# modattn tune cache v1\n", 24) == 0 && strstr(txt, "\tfast_impl\t"));

    /* the measurement decides, not the order or the priority: with the costs reversed, a new shape
     * class (Sq 64) is won by slow_impl, and the first class keeps its winner */
    atomic_store(&g_cost_slow, 1000);
    atomic_store(&g_cost_fast, 3000000);
    ctx = open_ctx("tune");
    CHECK(run_shape(ctx, 64) == 0);
    modattn_attn_desc d64 = modattn_attn_desc_make(2, 2, 2, 64, 64, 8, false);
    CHECK(modattn_explain(ctx, &d64, e, 8, &n) == 0);
    CHECK_MSG(find(e, n, "slow_impl")->verdict == MODATTN_VERDICT_CHOSEN &&
                  fabs(find(e, n, "fast_impl")->measured_ms - 3.0) < 1e-9,
              "costs reversed: slow_impl verdict %d, fast_impl measured %.6f ms", (int)find(e, n, "slow_impl")->verdict,
              find(e, n, "fast_impl")->measured_ms);
    CHECK(modattn_explain(ctx, &d, e, 8, &n) == 0 && find(e, n, "fast_impl")->verdict == MODATTN_VERDICT_CHOSEN);
    modattn_ctx_free(ctx);
    atomic_store(&g_cost_slow, 3000000);
    atomic_store(&g_cost_fast, 1000);

    /* a new context under auto uses the remembered winner */
    ctx = open_ctx("auto");
    CHECK(modattn_explain(ctx, &d, e, 8, &n) == 0 && find(e, n, "fast_impl")->verdict == MODATTN_VERDICT_CHOSEN);
    CHECK(run_shape(ctx, 16) == 0);
    CHECK(modattn__ctx_impl_stats(ctx, (size_t)modattn_ctx_find(ctx, "fast_impl"), &st) == 0 && st.calls == 1);
    modattn_ctx_free(ctx);

    /* a corrupt file is ignored, then rewritten whole */
    FILE *f = fopen(path, "w");
    fputs("garbage\x01\x02\nmore\tgarbage\n", f);
    fclose(f);
    ctx = open_ctx("tune");
    CHECK(ctx != NULL && modattn_explain(ctx, &d, e, 8, &n) == 0 && find(e, n, "slow_impl")->verdict == MODATTN_VERDICT_CHOSEN);
    CHECK(run_shape(ctx, 16) == 0);
    modattn_ctx_free(ctx);
    txt = slurp(path);
    CHECK(strncmp(txt, "# modattn tune cache v1\n", 24) == 0 && !strstr(txt, "garbage"));
    /* truncated last line: skipped, the rest kept */
    f = fopen(path, "a");
    fputs("half a line without newline\tx", f);
    fclose(f);
    ctx = open_ctx("auto");
    CHECK(modattn_explain(ctx, &d, e, 8, &n) == 0 && find(e, n, "fast_impl")->verdict == MODATTN_VERDICT_CHOSEN);
    modattn_ctx_free(ctx);

    /* two processes tuning different shapes at once: both entries survive, the file stays valid */
    unlink(path);
    for (int round = 0; round < 3; round++) {
        pid_t kids[2];
        for (int c = 0; c < 2; c++) {
            kids[c] = fork();
            if (kids[c] == 0) {
                modattn_ctx *cc = open_ctx("tune");
                int rc = cc && run_shape(cc, c == 0 ? 4 : 2) == 0 ? 0 : 1;
                modattn_ctx_free(cc);
                _exit(rc);
            }
        }
        for (int c = 0; c < 2; c++) {
            int status = 0;
            waitpid(kids[c], &status, 0);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
    txt = slurp(path);
    CHECK(strstr(txt, "|Sq4|") && strstr(txt, "|Sq2|") && strncmp(txt, "# modattn tune cache v1\n", 24) == 0);

    /* a directory that cannot be written: tuning still works, in memory */
    setenv("MODATTN_CACHE_DIR", "/proc/modattn-cannot-write-here", 1);
    ctx = open_ctx("tune");
    CHECK(run_shape(ctx, 16) == 0);
    CHECK(modattn_explain(ctx, &d, e, 8, &n) == 0 && find(e, n, "fast_impl")->verdict == MODATTN_VERDICT_CHOSEN);
    modattn_ctx_free(ctx);

    unlink(path);
    char lock[300];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    rmdir(dir);
    return test_finish("test_tune");
}
