/* tests/model/test_signals.c — a program that handles signals can embed while they arrive.
 *
 * oneDNN's JIT f32 GEMMs (what the encoder's matmuls run on AVX2-only CPUs) point the stack
 * pointer into the heap while they run, and a signal handled meanwhile wrote its frame over the
 * heap: glibc aborted ("corrupted size vs. prev_size") in about half the runs of this test before
 * core/signals.h (oneDNN issue #4845). Here a no-op SIGUSR1 handler is installed, another thread
 * sends SIGUSR1 to the process every millisecond, and 64 texts of 256 tokens are embedded 4 at a
 * time on the calling thread (a pool of 1, so the GEMMs run where the signals land) and then on a
 * pool of 2. Checks: no crash, the same vectors as without signals bit for bit, the handler did run
 * (the signals were not lost), and the calling thread's signal mask is what it was. Under the
 * sanitizers (whose allocator hides this corruption) 8 texts keep the time down. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "core/internal_core.h"
#include "test_util.h"

#define MODEL ".models/all-MiniLM-L6-v2"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static atomic_int g_handled, g_stop;

static void on_usr1(int sig) {
    (void)sig;
    atomic_fetch_add(&g_handled, 1);
}

static void *pester(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        kill(getpid(), SIGUSR1);
        usleep(1000);
    }
    return NULL;
}

static int embed_all(modattn_model *m, const char *const *t, size_t n, float *out) {
    for (size_t i = 0; i < n; i += 4) {
        int st = modattn_model_embed(m, t + i, NULL, n - i < 4 ? n - i : 4, out + i * 384, NULL);
        if (st) return st;
    }
    return 0;
}

int main(void) {
    struct stat sb;
    if (stat(MODEL, &sb) != 0) {
        fprintf(stderr, "test_signals: %s is missing: run `make model`\n", MODEL);
        return 1;
    }
    const size_t n = SANITIZED ? 8 : 64;
    static char buf[64][2400];
    const char *texts[64];
    for (size_t i = 0; i < n; i++) {
        buf[i][0] = '\0';
        for (int w = 0; w < 28; w++) {
            char word[96];
            snprintf(word, sizeof word, "text %zu says bees make honey near volcano %d, ", i, w);
            strcat(buf[i], word);
        }
        texts[i] = buf[i];
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART: the harshest case */
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    float *quiet = malloc(n * 384 * sizeof(float)), *noisy = malloc(n * 384 * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        modattn_ctx_options o;
        memset(&o, 0, sizeof o);
        o.threads = threads;
        o.plugin_path = "";
        modattn_ctx *ctx = NULL;
        modattn_model *m = NULL;
        CHECK(modattn_ctx_create(&o, &ctx) == 0);
        CHECK_MSG(ctx && modattn_model_load(ctx, MODEL, &m) == 0, "load: %s", modattn_last_error());
        if (!m) {
            modattn_ctx_free(ctx);
            break;
        }
        CHECK(embed_all(m, texts, n, quiet) == 0);
        sigset_t before, after;
        pthread_sigmask(SIG_SETMASK, NULL, &before);
        atomic_store(&g_handled, 0);
        atomic_store(&g_stop, 0);
        pthread_t th;
        CHECK(pthread_create(&th, NULL, pester, NULL) == 0);
        uint64_t t0 = modattn__now_ns();
        int st = embed_all(m, texts, n, noisy);
        atomic_store(&g_stop, 1);
        pthread_join(th, NULL);
        pthread_sigmask(SIG_SETMASK, NULL, &after);
        CHECK_MSG(st == 0, "embedding under signals: %s", modattn_last_error());
        CHECK_MSG(memcmp(quiet, noisy, n * 384 * sizeof(float)) == 0, "%d threads: other vectors under signals",
                  threads);
        CHECK_MSG(atomic_load(&g_handled) > 0, "no SIGUSR1 was handled");
        int same_mask = 1;
        for (int s = 1; s < 32; s++) same_mask &= sigismember(&before, s) == sigismember(&after, s);
        CHECK_MSG(same_mask, "the calling thread's signal mask changed");
        printf("test_signals: %d thread(s): %zu texts in %.1f s with %d SIGUSR1 handled, same vectors\n", threads, n,
               (double)(modattn__now_ns() - t0) * 1e-9, atomic_load(&g_handled));
        modattn_model_free(m);
        modattn_ctx_free(ctx);
    }
    free(quiet);
    free(noisy);
    return test_finish("test_signals");
}
