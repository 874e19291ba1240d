/* modattn/backend/conformance.h — the conformance suite: every registered implementation against the
 * fp64 oracle (the `reference` implementation run on f64 copies of the inputs) over a generated
 * grid of configurations. The same suite is a CTest and `modattn check`.
 *
 * Per configuration and implementation the outcome is one of:
 *   passed       every |O - oracle| <= 2 * (max error of a naive fp32 implementation) + 1e-6
 *                + one fp32 ulp of the oracle's value (the output's own unavoidable rounding), the
 *                same for LSE; the naive error is the largest of three summation orders, no NaN, infinities match in sign, guard regions around and gaps
 *                inside every output untouched, inputs unchanged, and (an implementation on the
 *                host) nothing written outside a workspace of exactly the bytes it asked for, in an
 *                allocation of its own between guard regions, poisoned (0xA5) before the run;
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
    /* Optional: called before each implementation runs configuration `config` (an isolating
     * caller records where a crash happened). */
    void (*on_config)(void *ud, int config, const char *impl);
    /* Optional: called after each (configuration, implementation) with its outcome: 0 passed,
     * 1 failed, 2 unsupported; ratio its error / tolerance (inf for NaN); why the failure or the
     * refusal ("" when it passed). */
    void (*on_result)(void *ud, int config, const char *impl, int outcome, double ratio, const char *why);
    void *ud;
    int first_config; /* start at this configuration (0: the first): a caller resuming after a crash */
} modattn_conformance_options;

#define MODATTN_CONFORMANCE_REASONS 8
typedef struct modattn_conformance_result {
    char name[64];
    int passed, failed, unsupported;
    double worst_ratio;        /* max over passed+failed of error / tolerance */
    char first_failure[512];   /* "" if none */
    char unsupported_reason[256]; /* one example */
    /* the configurations refused, counted per reason (the first MODATTN_CONFORMANCE_REASONS
     * reasons; refusals for other reasons in other_reasons) */
    int nreasons, other_reasons;
    struct {
        char text[160];
        int count;
    } reasons[MODATTN_CONFORMANCE_REASONS];
} modattn_conformance_result;

/* The configuration's shape in words ("B=2 Hq=4 Hkv=1 Sq=37 Sk=64 D=32 causal kv_lens ...");
 * "" past the grid. */
void modattn_conformance_describe(int config, char *buf, size_t len);

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
