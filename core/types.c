/* core/types.c — names and sizes of the shared types of modattn/types.h, and the contiguous
 * tensor view. Core, so that the device layer and the backends use them without the attention
 * layer (they lived in attn/tensor.c, which made device/ depend on attn/). */
#include "modattn/types.h"

#include <string.h>

const char *modattn_device_kind_name(modattn_device_kind kind) {
    switch (kind) {
    case MODATTN_DEVICE_CPU: return "cpu";
    case MODATTN_DEVICE_CUDA: return "cuda";
    case MODATTN_DEVICE_OPENCL: return "opencl";
    case MODATTN_DEVICE_XLA: return "xla";
    default: return "unknown";
    }
}

const char *modattn_dtype_name(modattn_dtype dtype) {
    switch (dtype) {
    case MODATTN_DTYPE_F32: return "f32";
    case MODATTN_DTYPE_F16: return "f16";
    case MODATTN_DTYPE_BF16: return "bf16";
    case MODATTN_DTYPE_F64: return "f64";
    default: return "unknown";
    }
}

size_t modattn_dtype_size(modattn_dtype dtype) {
    switch (dtype) {
    case MODATTN_DTYPE_F32: return 4;
    case MODATTN_DTYPE_F16: return 2;
    case MODATTN_DTYPE_BF16: return 2;
    case MODATTN_DTYPE_F64: return 8;
    default: return 0;
    }
}

modattn_tensor modattn_tensor_contiguous(void *data, modattn_dtype dtype, int64_t d0, int64_t d1,
                                         int64_t d2, int64_t d3) {
    modattn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.device.kind = MODATTN_DEVICE_CPU;
    t.shape[0] = d0, t.shape[1] = d1, t.shape[2] = d2, t.shape[3] = d3;
    t.stride[3] = 1;
    t.stride[2] = d3;
    t.stride[1] = d2 * d3;
    t.stride[0] = d1 * d2 * d3;
    t.capacity = d0 * d1 * d2 * d3;
    return t;
}
