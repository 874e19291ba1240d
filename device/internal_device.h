/* device/internal_device.h — the library's own functions of modattn/backend/device.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_DEVICE_INTERNAL_DEVICE_H
#define MODATTN_DEVICE_INTERNAL_DEVICE_H

#include "modattn/backend/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Finds the devices once (thread-safe, idempotent). Never fails: a backend that finds nothing
 * records why (modattn_device_absent_reasons). */
void modattn__devices_init(void);

int modattn__device_synchronize(const modattn_device_iface *dev);

int modattn__device_control(const modattn_device_iface *dev, int op, void *arg);

/* The encoder's ops (wrappers: argument checks, the op's trace span named "device.<op>" on the
 * calling thread; the device's own spans go on its track). MODATTN_EUNSUPPORTED, naming the op
 * and the device, when the device does not run it. */
int modattn__device_embed(const modattn_device_iface *dev, const modattn_op_embed_args *a);

int modattn__device_linear(const modattn_device_iface *dev, const modattn_op_linear_args *a);

int modattn__device_pool(const modattn_device_iface *dev, const modattn_op_pool_args *a);

/* norm, rotary, glu: the pre-LN / rotary / gated encoders' ops (no host fallback: a device
 * without them refuses such a model at load). */
int modattn__device_norm(const modattn_device_iface *dev, const modattn_op_norm_args *a);

int modattn__device_rotary(const modattn_device_iface *dev, const modattn_op_rotary_args *a);

int modattn__device_glu(const modattn_device_iface *dev, const modattn_op_glu_args *a);

/* The same ops run on the host (the CPU device) for a device that does not run them: inputs read
 * from the device, the CPU's op, outputs written back; counted per device and op and traced as
 * "fallback.<op>". Only for callers that were asked to (modattn_model_options.host_fallback):
 * nothing in modattn falls back on its own. A linear whose weight only a plan holds cannot. */
int modattn__device_host_embed(const modattn_device_iface *dev, const modattn_op_embed_args *a);

int modattn__device_host_linear(const modattn_device_iface *dev, const modattn_op_linear_args *a);

int modattn__device_host_pool(const modattn_device_iface *dev, const modattn_op_pool_args *a);

/* Calls that ran on the host for dev because it refuses op, since the process started (a call
 * is counted under each op of it the device refuses: a residual linear without the device's
 * LayerNorm counts as layernorm). */
uint64_t modattn__device_fallback_count(const modattn_device_iface *dev, modattn_op op);

/* The graph slot (wrappers: the device's name and the step in every error, trace spans
 * "device.graph_load" / "device.graph_forward"). Without the slot: false, and the model runs op
 * by op. */
bool modattn__device_has_graph(const modattn_device_iface *dev);

bool modattn__device_graph_supports(const modattn_device_iface *dev, const modattn_encoder_graph *g, char *reason,
                                   size_t len);

int modattn__device_graph_load(const modattn_device_iface *dev, const modattn_encoder_graph *g, void **model);

int modattn__device_graph_forward(const modattn_device_iface *dev, void *model, int64_t B, int64_t S,
                                 const int32_t *ids, const int32_t *lens, float *out);

void modattn__device_graph_unload(const modattn_device_iface *dev, void *model);

/* Prepares a weight for linear calls of shape's N, K, lda, ldy, accumulate (see linear_prepare).
 * *out = NULL (status 0) when the device prepares nothing: pass plan = NULL then. Ownership:
 * modattn__linear_plan_free. */
int modattn__device_linear_prepare(const modattn_device_iface *dev, const modattn_op_linear_args *shape,
                                  modattn_linear_plan **out);

void modattn__linear_plan_free(modattn_linear_plan *p); /* NULL is fine */

/* Rows the device's linear op works in (>= 1); see modattn_encoder_ops.row_block. */
int64_t modattn__device_row_block(const modattn_device_iface *dev);

/* Allocates `bytes` on `dev` in category `cat`, counted for that device (and against the budget,
 * per device). Errors: MODATTN_EBUDGET / MODATTN_ENOMEM with a message naming the device, the
 * buffer (`what`, a short label such as "attention workspace") and the bytes asked.
 * Ownership: release with modattn__buffer_free(). bytes == 0 gives a valid empty buffer. */
int modattn__buffer_alloc(const modattn_device_iface *dev, size_t bytes, modattn_mem_category cat, const char *what,
                         modattn_buffer **out);

void modattn__buffer_free(modattn_buffer *buf); /* NULL is fine */

/* `bytes` of host data as a buffer on `dev`: on a device with host memory the buffer is `src`
 * itself (no copy, nothing counted: the caller owns src and keeps it alive and unchanged until
 * the buffer is freed); elsewhere a new buffer (counted as modattn__buffer_alloc) holding a copy. */
int modattn__buffer_from_host(const modattn_device_iface *dev, const void *src, size_t bytes, modattn_mem_category cat,
                             const char *what, modattn_buffer **out);

/* Blocking transfers; offsets and sizes are checked against the buffer (MODATTN_ERANGE). */
int modattn__buffer_write(modattn_buffer *buf, size_t offset, const void *src, size_t bytes);

int modattn__buffer_read(const modattn_buffer *buf, size_t offset, void *dst, size_t bytes);

int modattn__buffer_copy(modattn_buffer *dst, size_t dst_offset, const modattn_buffer *src, size_t src_offset,
                        size_t bytes);

int modattn__buffer_fill(modattn_buffer *buf, size_t offset, uint8_t byte, size_t bytes);

/* A contiguous row-major view of [d0, d1, d2, d3] starting `offset` bytes into `buf`. */
modattn_tensor modattn__tensor_on_buffer(modattn_buffer *buf, size_t offset, modattn_dtype dtype, int64_t d0,
                                        int64_t d1, int64_t d2, int64_t d3);

int modattn__device_mem_get_stats(const modattn_device_iface *dev, modattn_device_mem_stats *out);

/* For a device that holds memory outside modattn__buffer_alloc (the XLA device's PJRT buffers, at
 * their on-device sizes): counted as a buffer would be, the budget applied (MODATTN_EBUDGET naming
 * `what`); every reserve is released with the same bytes. */
int modattn__device_mem_reserve(const modattn_device_iface *dev, modattn_mem_category cat, size_t bytes,
                               const char *what);

void modattn__device_mem_release(const modattn_device_iface *dev, modattn_mem_category cat, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
