/* examples/plugin/myattn.c — a complete attention plugin for modattn, to copy and make your own.
 *
 * What a plugin is: a shared object exporting one function,
 *     const modattn_attn_impl *modattn_plugin_entry(void);
 * that returns a table (modattn/backend/impl.h). modattn finds it on MODATTN_PLUGIN_PATH (files or folders of
 * *.so, colon-separated), in ~/.local/lib/modattn/plugins/ and /usr/local/lib/modattn/plugins/, and in
 * Python packages that declare it (an entry point in the group "modattn.plugins", see README.md).
 *
 * The linking rule: a plugin calls NO function of libmodattn. The host may be the statically linked
 * `modattn` program, where no libmodattn symbol is visible to a plugin, or a program with its own copy
 * of the library; linking -lmodattn would load a second copy. Everything a plugin needs arrives in its
 * calls: the shape (desc), the tensors (call), threads (exec->parallel_for), memory (the workspace it
 * asked for). The headers' types and the static inline helpers in modattn/backend/impl.h
 * (modattn_plugin_dtype_size, modattn_plugin_offset) are all it may use. pkg-config gives the include
 * path: cc -shared -fPIC $(pkg-config --cflags modattn) myattn.c -o libmyattn.so -lm
 *
 * The lifecycle and workspace contract (modattn/backend/impl.h says the same):
 *   - init() once per context that loads the plugin (may refuse: the reason is shown), shutdown() once;
 *   - supports() and workspace_bytes() are pure functions of desc (and nthreads): called often;
 *   - run() may be called from several threads at once, each with its own workspace: keep no
 *     mutable state in the table or in globals;
 *   - the workspace is workspace_bytes() bytes exactly, MODATTN_ALIGN (64) aligned, NOT zeroed
 *     (`modattn check` fills it with 0xA5 and puts guard bytes around it: a write outside fails the
 *     check, naming the workspace), reused across calls with other contents;
 *   - exec->parallel_for(exec, n, fn, arg) runs fn(arg, i, thread) for i in [0, n) on the host's
 *     threads; thread is in [0, exec->nthreads): index per-thread scratch with it;
 *   - run() never allocates and never writes its inputs; o (and lse) are written only through
 *     their views (strides in elements, any order);
 *   - refusals: supports() says why in words, run() returns a negative modattn_status and may fill
 *     reason: modattn prints "implementation 'NAME' refused: REASON" everywhere.
 *
 * This one: fp32 on the CPU, every case of the contract (GQA, D != Dv, causal bottom-right, kv_lens,
 * additive broadcast masks, lse, strided views) but sliding windows, ALiBi and softcapping, which it
 * refuses, one query row per task with its scores in the
 * workspace. Build it, then run the conformance suite against it in your CI:
 *     make && modattn check --plugin ./libmyattn.so
 * (exit status 1 on any failure). -DPLANT_OVERRUN and -DPLANT_CRASH plant the two faults the suite
 * must report by name, -DPLANT_FAIL a run that returns an error (tests/attn/cli_plugin_kit.sh). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "modattn/backend/impl.h"

typedef struct job {
    const modattn_attn_desc *d;
    const modattn_attn_call *c;
    float *ws;         /* the workspace: per thread, Sk scores */
    int64_t per_thread;
} job;

static inline float at(const modattn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t e) {
    return ((const float *)t->data)[modattn_plugin_offset(t, a, b, c, e)];
}

/* one query row: item = (b * Hq + h) * Sq + i */
static void row(void *arg, int64_t item, int thread) {
    const job *j = arg;
    const modattn_attn_desc *d = j->d;
    const modattn_attn_call *c = j->c;
    const int64_t i = item % d->Sq, h = (item / d->Sq) % d->Hq, b = item / (d->Sq * d->Hq);
    const int64_t hk = h / (d->Hq / d->Hkv);
    float *s = j->ws + (int64_t)thread * j->per_thread;
#ifdef PLANT_CRASH
    if (d->Sq == 37 && item == 0) s = (float *)(void *)16; /* a planted wild pointer on one shape */
#endif
    const int64_t L = c->kv_lens ? c->kv_lens[b] : d->Sk;
    int64_t lim = L;
    if (d->causal) { /* query i sees keys j <= i + L - Sq */
        const int64_t last = i + L - d->Sq;
        lim = last + 1 < L ? last + 1 : L;
        if (lim < 0) lim = 0;
    }
    const int64_t mb = d->has_mask && d->mask_b != 1 ? b : 0, mh = d->has_mask && d->mask_h != 1 ? h : 0;
    float mx = -INFINITY;
    for (int64_t k = 0; k < lim; k++) {
        float dot = 0;
        for (int64_t e = 0; e < d->D; e++) dot += at(&c->q, b, h, i, e) * at(&c->k, b, hk, k, e);
        float v = d->scale * dot;
        if (d->has_mask) v += at(&c->mask, mb, mh, i, k);
        s[k] = v;
        if (v > mx) mx = v;
    }
    float *o = (float *)c->o.data;
    if (mx == -INFINITY) { /* no visible key: o = 0, lse = -inf */
        for (int64_t e = 0; e < d->Dv; e++) o[modattn_plugin_offset(&c->o, b, h, i, e)] = 0;
        if (d->has_lse) ((float *)c->lse.data)[modattn_plugin_offset(&c->lse, b, h, i, 0)] = -INFINITY;
        return;
    }
    float sum = 0;
    for (int64_t k = 0; k < lim; k++) sum += s[k] = expf(s[k] - mx);
    for (int64_t e = 0; e < d->Dv; e++) {
        float acc = 0;
        for (int64_t k = 0; k < lim; k++) acc += s[k] * at(&c->v, b, hk, k, e);
        o[modattn_plugin_offset(&c->o, b, h, i, e)] = acc / sum;
    }
    if (d->has_lse) ((float *)c->lse.data)[modattn_plugin_offset(&c->lse, b, h, i, 0)] = mx + logf(sum);
}

static bool my_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (d->device.kind != MODATTN_DEVICE_CPU) {
        snprintf(reason, len, "runs on CPU memory only");
        return false;
    }
    if (d->dtype != MODATTN_DTYPE_F32) {
        snprintf(reason, len, "fp32 only (the tensors are %zu-byte elements)", modattn_plugin_dtype_size(d->dtype));
        return false;
    }
    /* Refuse, with the reason, every option of the contract this kernel does not implement: one
     * it ignored would compute another operator (the conformance suite would fail it). */
    if (d->has_window || d->has_alibi || d->softcap > 0.0f) {
        snprintf(reason, len, "no %s in this kernel", d->has_window ? "sliding window" : d->has_alibi ? "ALiBi" : "softcapping");
        return false;
    }
    return true;
}

static size_t my_workspace(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx;
    return (size_t)nthreads * (size_t)d->Sk * sizeof(float);
}

static int my_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *ws, size_t ws_bytes,
                  const modattn_exec *exec, char *reason, size_t len) {
    if (ws_bytes < my_workspace(ctx, d, exec->nthreads)) {
        snprintf(reason, len, "workspace of %zu bytes, %zu asked for", ws_bytes, my_workspace(ctx, d, exec->nthreads));
        return MODATTN_EINVAL;
    }
    const int64_t rows = d->B * d->Hq * d->Sq;
    if (rows == 0) return 0;
#ifdef PLANT_FAIL
    snprintf(reason, len, "planted failure: this build refuses to run");
    return MODATTN_ERUNTIME;
#endif
    job j = {d, c, ws, d->Sk};
    exec->parallel_for(exec, rows, row, &j);
#ifdef PLANT_OVERRUN
    if (d->Sk > 0) ((float *)ws)[ws_bytes / sizeof(float)] = 1.0f; /* a planted write one past the end */
#endif
    return 0;
}

static const modattn_attn_impl k_myattn = {
    /* .api_version     = */ MODATTN_IMPL_API_VERSION,
    /* .name            = */ "myattn",
    /* .description     = */ "the plugin kit's skeleton: one row per task, scores in the workspace",
    /* .device          = */ MODATTN_DEVICE_CPU,
    /* .priority        = */ 1, /* below the built-ins: --attn myattn asks for it by name */
    /* .ctx             = */ NULL,
    /* .init            = */ NULL,
    /* .shutdown        = */ NULL,
    /* .supports        = */ my_supports,
    /* .workspace_bytes = */ my_workspace,
    /* .run             = */ my_run,
    /* .control         = */ NULL,
};

__attribute__((visibility("default"))) const modattn_attn_impl *modattn_plugin_entry(void) { return &k_myattn; }
