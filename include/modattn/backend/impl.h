/* modattn/backend/impl.h — the interface an attention implementation fills in (built in or plugin).
 *
 * This header is all a kernel author needs. An implementation calls no function of libmodattn (the
 * host may be the statically linked CLI, where none is visible to a plugin; linking -lmodattn would
 * load a second copy): the declarations in the headers it includes are for the host. What it may
 * use is the types and the static inline helpers below (modattn_plugin_*). Threads come from the
 * host through modattn_exec; memory comes from the host as the workspace the implementation asked
 * for in workspace_bytes(). `run` never allocates. examples/plugin/ is a complete skeleton.
 *
 * The workspace: exactly workspace_bytes() bytes, MODATTN_ALIGN-aligned, not zeroed, reused across
 * calls with other contents; `modattn check` poisons it and guards both ends (a write outside is a
 * failure naming the workspace). run() may be called from several threads at once, each with its own
 * workspace: no mutable state in the table or in globals. Thread ids passed by parallel_for are in
 * [0, exec->nthreads): index per-thread scratch with them.
 *
 * Slots are only ever appended; MODATTN_IMPL_API_VERSION changes when the meaning of an existing
 * slot changes, and the host refuses a table built against another version.
 *
 * Plugins: a shared object that exports
 *     const modattn_attn_impl *modattn_plugin_entry(void);
 * found on MODATTN_PLUGIN_PATH (colon-separated files or folders; every *.so in a folder). */
#ifndef MODATTN_IMPL_H
#define MODATTN_IMPL_H

#include "modattn/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: tensors gained buffer/offset (device memory); device workspaces are buffers.
 * 3: the call and descriptor gained a sliding window, ALiBi slopes and softcapping (appended
 *    fields): supports() must refuse what it does not implement. A table of version 2 still
 *    loads (its descriptor's prefix is unchanged) and is refused, with that reason, every call
 *    that uses a window, ALiBi or softcapping: it cannot see them. */
#define MODATTN_IMPL_API_VERSION 3u
#define MODATTN_IMPL_API_VERSION_MIN 2u /* the oldest version the host still loads */
#define MODATTN_PLUGIN_ENTRY "modattn_plugin_entry"

/* modattn_exec, the host's execution services handed to run(), is in modattn/types.h. */

typedef struct modattn_attn_impl {
    uint32_t api_version;        /* MODATTN_IMPL_API_VERSION */
    const char *name;            /* unique, [a-z0-9_]+ */
    const char *description;     /* one line */
    modattn_device_kind device;  /* where its tensors must live */
    int priority;                /* higher is preferred by the `auto` policy on its device */
    void *ctx;                   /* passed back to every slot */

    /* Optional. Checks the machine (CPU features, driver, ...). A non-zero return makes the
     * implementation unavailable; `reason` says why. */
    int (*init)(void *ctx, char *reason, size_t reason_len);
    /* Optional. Called once when the registry is freed, if init succeeded or was NULL. */
    void (*shutdown)(void *ctx);
    /* Required. true if it can run `desc`; otherwise false with the reason in words. */
    bool (*supports)(void *ctx, const modattn_attn_desc *desc, char *reason, size_t reason_len);
    /* Optional (NULL: none). Bytes of workspace run() needs for `desc` with `nthreads` threads. */
    size_t (*workspace_bytes)(void *ctx, const modattn_attn_desc *desc, int nthreads);
    /* Required. Computes the call. `workspace` is MODATTN_ALIGN-aligned with at least the bytes
     * asked for. For an implementation whose device is not the CPU, `workspace` is a
     * `modattn_buffer *` on the tensors' device (NULL when 0 bytes were asked), and the call's
     * tensors are in buffer form. run() returns when the outputs are complete on the device
     * (later reads on the device's queue see them). Returns 0, or a negative modattn_status;
     * `reason` may say why. */
    int (*run)(void *ctx, const modattn_attn_desc *desc, const modattn_attn_call *call,
               void *workspace, size_t workspace_bytes, const modattn_exec *exec,
               char *reason, size_t reason_len);
    /* Optional escape hatch for implementation-specific knobs; MODATTN_EUNSUPPORTED if unknown. */
    int (*control)(void *ctx, int op, void *arg);
} modattn_attn_impl;

/* control() ops any implementation may answer (from 0x10000 up; an implementation's own ops stay
 * below), MODATTN_EUNSUPPORTED where it does not:
 *   MODATTN_CTL_KERNEL  arg: modattn_ctl_kernel *. Writes, for q->desc run on q->nthreads threads,
 *                       which of the implementation's kernels run() would use, in words (for
 *                       benchmarks and traces: "record which kernel ran"). */
#define MODATTN_CTL_KERNEL 0x10000
typedef struct modattn_ctl_kernel {
    const modattn_attn_desc *desc;
    int nthreads;
    char *buf;
    size_t len;
} modattn_ctl_kernel;

typedef const modattn_attn_impl *(*modattn_plugin_entry_fn)(void);

/* Helpers a plugin may use (static inline: nothing to link). */
static inline size_t modattn_plugin_dtype_size(modattn_dtype t) {
    return t == MODATTN_DTYPE_F32 ? 4 : t == MODATTN_DTYPE_F64 ? 8 : (t == MODATTN_DTYPE_F16 || t == MODATTN_DTYPE_BF16) ? 2 : 0;
}
/* The element offset of [i0, i1, i2, i3] in a view (host form: from t->data). */
static inline int64_t modattn_plugin_offset(const modattn_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2] + i3 * t->stride[3];
}

#ifdef __cplusplus
}
#endif
#endif
