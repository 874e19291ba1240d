/* tests/sweep.h — the allocation-failure sweep: run an operation with the Nth allocation failing,
 * for N = 1, 2, ... until it succeeds. Every failing run must return an error (never crash), and
 * leave the allocator's bytes in use exactly where they were: no leak on any error path. */
#ifndef MODATTN_TEST_SWEEP_H
#define MODATTN_TEST_SWEEP_H
#include "modattn/modattn.h"
#include "core/internal_core.h"
#include "test_util.h"

/* op returns 0 on success or a negative status, and must free everything it made either way. */
typedef int (*sweep_op)(void *arg);

/* An op that must disarm the injection itself (to check state after a failure) stores the
 * allocation count it reached here first. */
static uint64_t sweep_attempts_hint;

/* Returns the number of allocation points swept (failing runs), or -1 if the sweep went wrong.
 * A first run without failures warms up what is built once and kept on purpose (the attention
 * workspace of a context, SQLite's page cache), so that only real leaks count. */
/* The failure number of the run in progress (for an op that opens what it needs unfailed). */
static uint64_t sweep_current_n;

static int sweep_allocations(const char *name, sweep_op op, void *arg, int max_n) {
    modattn_mem_stats before, after;
    const uint64_t t0 = modattn__now_ns();
    sweep_current_n = 0; /* the first run: nothing fails */
    if (op(arg) != 0) {
        t_fail++;
        fprintf(stderr, "%s: fails without any injected failure: %s\n", name, modattn_last_error());
        return -1;
    }
    for (int n = 1; n <= max_n; n++) {
        modattn_mem_get_stats(&before);
        sweep_attempts_hint = 0;
        sweep_current_n = (uint64_t)n;
        modattn__mem_fail_nth((uint64_t)n);
        int st = op(arg);
        uint64_t attempts = sweep_attempts_hint ? sweep_attempts_hint : modattn__mem_fail_counter();
        modattn__mem_fail_nth(0);
        modattn_mem_get_stats(&after);
        if (after.current_total != before.current_total) {
            t_fail++;
            fprintf(stderr, "%s: failing allocation #%d leaked %lld bytes (status %d: %s)\n", name, n,
                    (long long)(after.current_total - before.current_total), st, modattn_last_error());
            return -1;
        }
        if (st == 0) {
            if (attempts >= (uint64_t)n) { /* the injected failure happened and was absorbed: fine if handled */
                t_pass++;
                continue;
            }
            t_pass++;
            printf("%s: %d allocation points, each failure clean (%.1f s)\n", name, n - 1, 1e-9 * (double)(modattn__now_ns() - t0));
            fflush(stdout);
            return n - 1;
        }
        if (st != MODATTN_ENOMEM && st != MODATTN_EBUDGET && st != MODATTN_ERUNTIME) {
            t_fail++;
            fprintf(stderr, "%s: failing allocation #%d gave status %d (%s), expected an out-of-memory error\n",
                    name, n, st, modattn_last_error());
            return -1;
        }
        if (!modattn_last_error()[0]) {
            t_fail++;
            fprintf(stderr, "%s: failing allocation #%d gave no message\n", name, n);
            return -1;
        }
        t_pass++;
    }
    t_fail++;
    fprintf(stderr, "%s: still failing after %d allocations\n", name, max_n);
    return -1;
}
#endif
