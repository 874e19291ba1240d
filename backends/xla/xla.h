/* backends/xla/xla.h — the XLA device's parts: a PJRT plugin (xla_pjrt.c: dlopen, the versioned
 * function table, a client, buffers, compile, execute, serialize), StableHLO text for the
 * encoder and for attention (xla_hlo.c), and the device itself (xla_device.c). Not public. */
#ifndef MODATTN_XLA_H
#define MODATTN_XLA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "modattn/backend/device.h"

/* ---- one PJRT plugin (xla_pjrt.c) */
typedef struct xla_plugin xla_plugin;
typedef struct xla_buf xla_buf; /* a PJRT buffer: one immutable whole array on the device */
typedef struct xla_exe xla_exe; /* a loaded executable */

typedef enum { XLA_F32 = 0, XLA_I32 } xla_type;

/* Loads and initialises the plugin at path, creates its client: 0, or MODATTN_EDEVICE with
 * `why` naming the plugin and the step (dlopen, GetPjrtApi, the API major version,
 * Plugin_Initialize, Client_Create, no device). */
int xla_plugin_open(const char *path, xla_plugin **out, char *why, size_t len);
void xla_plugin_close(xla_plugin *p);
/* "cpu", "tpu", "cuda" (the client's platform name) */
const char *xla_plugin_platform(const xla_plugin *p);
/* the plugin's platform version and API version, e.g. "cpu (PJRT API 0.81)" */
const char *xla_plugin_version(const xla_plugin *p);
const char *xla_plugin_path(const xla_plugin *p);
int xla_plugin_devices(const xla_plugin *p);
/* Device memory in use by our buffers on this plugin's device (their on-device sizes). */
int64_t xla_plugin_bytes(const xla_plugin *p);

/* Host array -> a new device buffer (waits until the host array may be reused). */
int xla_buf_upload(xla_plugin *p, const void *data, xla_type t, const int64_t *dims, int nd, xla_buf **out, char *why,
                   size_t len);
int xla_buf_download(xla_plugin *p, xla_buf *b, void *dst, size_t bytes, char *why, size_t len);
void xla_buf_free(xla_plugin *p, xla_buf *b);
int64_t xla_buf_bytes(const xla_buf *b);

/* Compiles StableHLO text (MLIR) for one device: 0, or MODATTN_EDEVICE with the plugin's words. */
int xla_compile(xla_plugin *p, const char *mlir, size_t n, xla_exe **out, char *why, size_t len);
/* The executable's bytes (PJRT_Executable_Serialize): *data from malloc, the caller frees. */
int xla_serialize(xla_plugin *p, xla_exe *e, void **data, size_t *n, char *why, size_t len);
int xla_deserialize(xla_plugin *p, const void *data, size_t n, xla_exe **out, char *why, size_t len);
/* Runs e on args (nargs buffers); its nouts outputs (<= 8) as new buffers in outs. */
int xla_execute(xla_plugin *p, xla_exe *e, xla_buf *const *args, size_t nargs, xla_buf **outs, size_t nouts, char *why,
                size_t len);
void xla_exe_free(xla_plugin *p, xla_exe *e);

/* ---- StableHLO text (xla_hlo.c) */
typedef struct xla_text {
    char *s;
    size_t n, cap;
    bool oom;
} xla_text;
void xla_text_free(xla_text *t);

/* What the encoder program computes (the model's configuration, in the graph slot's words). */
typedef struct xla_encoder_shape {
    int64_t B, S, H, heads, I, V, P, layers, dim;
    double eps;
    modattn_act act;
    unsigned pooling; /* modattn_pooling bits: cls, max, mean only */
    bool normalize;
    bool bf16; /* --precision bf16: the dense layers' operands in bfloat16, sums in fp32 */
} xla_encoder_shape;
/* The whole forward for one (B, S) bucket: arguments the weights in modattn_encoder_graph's
 * order (word, pos, type0, emb_g, emb_b, then per layer wqkv, bqkv, wo, bo, ln1_g, ln1_b, w1, b1,
 * w2, b2, ln2_g, ln2_b), then ids i32[B,S] and lens i32[B]; result f32[B, dim]. */
int xla_hlo_encoder(const xla_encoder_shape *e, xla_text *out);

/* Attention alone, the contract (modattn/attention.h) on contiguous tensors: q f32[B,Hq,Sq,D],
 * k f32[B,Hkv,Sk,D], v f32[B,Hkv,Sk,Dv], kv_lens i32[B] (Sk where absent) -> o f32[B,Hq,Sq,Dv];
 * causal aligned bottom-right (query i sees keys j <= i + kv_lens[b] - Sq). */
typedef struct xla_attn_shape {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    double scale;
    bool causal;
    bool has_mask, has_lse;  /* mask f32[mask_b, mask_h, Sq, Sk] the 5th argument; lse f32[B,Hq,Sq,1] the 2nd result */
    int64_t mask_b, mask_h;
    int64_t wl, wr;  /* sliding window sides (-1: unbounded; both -1: none) */
    double softcap;  /* 0: none */
    bool has_alibi;  /* slopes f32[Hq] the last argument (after the mask when there is one) */
} xla_attn_shape;
int xla_hlo_attention(const xla_attn_shape *a, xla_text *out);

/* ---- the device (xla_device.c) */
#define XLA_MAX_DEVICES 8
int modattn__devices_xla(const modattn_device_iface **out, int max, char *why, size_t len);
/* Device index's plugin (opened if it was not), locked: every PJRT call on it runs under the lock;
 * NULL with why (and nothing locked) when there is no such device or it cannot be opened. */
xla_plugin *modattn__xla_lock(int index, char *why, size_t len);
void modattn__xla_unlock(int index);
/* What frees attention's programs compiled on a device before its plugin closes: xla_attn.c hands
 * it to the device (under the device's lock, before its first program) so that the device, below
 * attention, never names it. */
typedef void (*xla_drop_fn)(int device, xla_plugin *p);
void modattn__xla_on_close(xla_drop_fn fn);

#endif
