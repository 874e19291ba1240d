/* modattn/conformance.h — the conformance suite: every registered implementation against the
 * fp64 oracle (the `reference` implementation run on f64 copies of the inputs) over a generated
 * grid of configurations. The same suite is a CTest and `modattn check`.
 *
 * Per configuration and implementation the outcome is one of:
 *   passed       every |O - oracle| <= 2 * (max error of a naive fp32 implementation) + 1e-6
 *                + one fp32 ulp of the oracle's value (the output's own unavoidable rounding), the
 *                same for LSE; the naive error is the largest of three summation orders, no NaN, infinities match in sign, guard regions around and gaps
 *                inside every output untouched, inputs unchanged;
 *   failed       any of those broken (or the run returned an error);
 *   unsupported  supports() refused or the implementation is unavailable: counted apart. */
#ifndef MODATTN_CONFORMANCE_H
#define MODATTN_CONFORMANCE_H

#include <stdio.h>
#include "modattn/dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn_conformance_options {
    const char *only;     /* one implementation by name, or NULL for all */
    int max_configs;      /* 0: the whole grid */
    uint64_t seed;        /* 0: the default seed */
    FILE *log;            /* failures (and progress when verbose) go here; NULL: quiet */
    bool verbose;
    int device_index;     /* implementations on a device (OpenCL, CUDA) run on that kind's device
                           * of this index (0: the first); the suite's buffers, guards included,
                           * are mirrored there and read back for the checks */
} modattn_conformance_options;

typedef struct modattn_conformance_result {
    char name[64];
    int passed, failed, unsupported;
    double worst_ratio;        /* max over passed+failed of error / tolerance */
    char first_failure[512];   /* "" if none */
    char unsupported_reason[256]; /* one example */
} modattn_conformance_result;

/* Number of configurations in the grid. */
int modattn_conformance_grid_size(void);

/* Runs the suite; fills one result per tested implementation (up to max) and sets *count.
 * Returns 0 when it ran (check the results for failures), or an error (no oracle, no memory,
 * unknown `only`). */
int modattn_conformance_run(modattn_ctx *ctx, const modattn_conformance_options *opt,
                            modattn_conformance_result *out, size_t max, size_t *count);

#ifdef __cplusplus
}
#endif
#endif
