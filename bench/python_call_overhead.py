"""bench/python_call_overhead.py — why the Python binding is written against CPython's C API and not
cffi (issue 17: "choose by measurement"): the same calls through the extension module and through
cffi in ABI mode (libmodattn.so via ffi.dlopen, no compiler needed), same process, same model:
a trivial call (the model's dimension) and one short text's embedding, with the vectors compared.
Needs numpy and cffi (pip install cffi numpy) and a build with the module and libmodattn.so:

  PYTHONPATH=build/python python bench/python_call_overhead.py [BUILD] [MODEL]
"""
import sys, time
BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
MODEL = sys.argv[2] if len(sys.argv) > 2 else ".models/all-MiniLM-L6-v2"
sys.path.insert(0, BUILD + "/python")
import modattn, numpy as np
from cffi import FFI
ffi = FFI()
ffi.cdef("""
typedef struct modattn_ctx modattn_ctx; typedef struct modattn_model modattn_model;
int modattn_ctx_create(const void *opt, modattn_ctx **out);
int modattn_model_load(modattn_ctx *ctx, const char *dir, modattn_model **out);
size_t modattn_model_dim(const modattn_model *model);
int modattn_model_embed(modattn_model *model, const char *const *texts, const size_t *lens, size_t n, float *out, int32_t *ntok);
""")
lib = ffi.dlopen(BUILD + "/libmodattn.so")
ctx = ffi.new("modattn_ctx **"); assert lib.modattn_ctx_create(ffi.NULL, ctx) == 0
m = ffi.new("modattn_model **"); assert lib.modattn_model_load(ctx[0], MODEL.encode(), m) == 0
pm = modattn.Model(MODEL)
def t(f, n):
    f(); a = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - a) / n
N = 200000
print("trivial call: C-API m.dim %.0f ns, cffi ABI modattn_model_dim %.0f ns" % (t(lambda: pm.dim, N) * 1e9, t(lambda: lib.modattn_model_dim(m[0]), N) * 1e9))
texts = ["how does the store survive a crash"]
def cffi_encode(texts=texts):
    keep = [ffi.new("char[]", s.encode()) for s in texts]
    arr = ffi.new("const char *[]", keep)
    out = np.empty((len(texts), 384), np.float32)
    assert lib.modattn_model_embed(m[0], arr, ffi.NULL, len(texts), ffi.cast("float *", out.ctypes.data), ffi.NULL) == 0
    return out
a = cffi_encode(); b = pm.encode(texts)
print("same vector:", np.array_equal(a, b))
print("encode 1 short text: C-API %.2f ms, cffi ABI %.2f ms" % (t(lambda: pm.encode(texts), 100) * 1e3, t(cffi_encode, 100) * 1e3))
