/* tests/test_util.h — a minimal assertion harness: every CHECK counts, a failure prints where and
 * why, and the test ends with "N passed, N failed" and a non-zero exit status on any failure. */
#ifndef MODATTN_TEST_UTIL_H
#define MODATTN_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_pass, t_fail;

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (cond) t_pass++;                                                        \
        else {                                                                     \
            t_fail++;                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                              \
    do {                                                                  \
        if (cond) t_pass++;                                               \
        else {                                                            \
            t_fail++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
        }                                                                 \
    } while (0)

/* Status is st and the thread's error message contains `needle`. */
#define CHECK_ERR(st, want, needle)                                                                   \
    do {                                                                                              \
        int st_ = (st);                                                                               \
        const char *m_ = modattn_last_error();                                                        \
        CHECK_MSG(st_ == (want) && strstr(m_, (needle)) != NULL, "status %d (want %d), message '%s' (want '%s')", \
                  st_, (int)(want), m_, (needle));                                                    \
    } while (0)

static inline int test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, t_pass, t_fail);
    return t_fail ? 1 : 0;
}
#endif
