/* python/src/attention.c — modattn.attention, explain, check and backends: the attention contract
 * (modattn/attention.h) on numpy arrays, read in place through the buffer protocol. */
#include "pymodattn.h"
#include "attn/internal_dispatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ arrays in */

typedef struct arg_tensor {
    Py_buffer view;
    bool have;
    PyObject *copy; /* a C-contiguous copy, only for negative strides */
    int ndim;
    int64_t shape[4];
    int64_t stride[4]; /* elements */
    int64_t capacity;  /* elements reachable from data: 1 + sum((shape-1)*stride), 0 if empty */
    void *data;
} arg_tensor;

static void tensor_release(arg_tensor *t) {
    if (t->have) PyBuffer_Release(&t->view);
    t->have = false;
    Py_CLEAR(t->copy);
}

/* "float64" for a numpy array (its dtype), else the buffer's format. */
static PyObject *dtype_name(PyObject *obj, const char *format) {
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    if (dt) {
        PyObject *s = PyObject_Str(dt);
        Py_DECREF(dt);
        if (s) return s;
    }
    PyErr_Clear();
    return PyUnicode_FromFormat("buffer format '%s'", format);
}

static bool format_is_f32(const char *f, Py_ssize_t itemsize) {
    if (itemsize != 4 || !f) return false;
    if (*f == '@' || *f == '=' || *f == '<') f++; /* native or little-endian (every host modattn builds for) */
    return strcmp(f, "f") == 0;
}

/* obj as a float32 tensor of `ndim` dimensions (or 2 when allow2, for a mask), read in place.
 * `what` names it in messages ("q"). 0, or -1 with ValueError / TypeError set. */
static int tensor_get(PyObject *obj, const char *what, int ndim, bool allow2, arg_tensor *t) {
    memset(t, 0, sizeof *t);
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a float32 numpy array, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        PyObject *src = t->copy ? t->copy : obj;
        if (PyObject_GetBuffer(src, &t->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) return -1;
        t->have = true;
        const char *fmt = t->view.format ? t->view.format : "B";
        if (!format_is_f32(fmt, t->view.itemsize)) {
            PyObject *dn = dtype_name(obj, fmt);
            pm_invalid("%s: expected a float32 array, got %S%s", what,
                         dn ? dn : Py_None, " (convert with .astype(numpy.float32))");
            Py_XDECREF(dn);
            tensor_release(t);
            return -1;
        }
        if (t->view.ndim != ndim && !(allow2 && t->view.ndim == 2)) {
            if (allow2)
                pm_invalid("%s: expected 4 dimensions (B|1, H|1, Sq, Sk) or 2 (Sq, Sk), got %d",
                             what, t->view.ndim);
            else
                pm_invalid("%s: expected %d dimensions (B, H, S, D), got %d", what, ndim,
                             t->view.ndim);
            tensor_release(t);
            return -1;
        }
        bool negative = false;
        for (int i = 0; i < t->view.ndim; i++) {
            Py_ssize_t s = t->view.strides ? t->view.strides[i] : 0;
            if (s % 4 != 0) {
                PyErr_Format(pm_InvalidArgumentError,
                             "%s: the stride of dimension %d is %zd bytes, not a multiple of 4 (the float32 size)",
                             what, i, s);
                tensor_release(t);
                return -1;
            }
            if (s < 0 && t->view.shape[i] > 1) negative = true;
        }
        if (negative && attempt == 0) { /* the contract wants strides >= 0: one copy */
            tensor_release(t);
            PyObject *np = pm_numpy();
            if (!np) return -1;
            t->copy = PyObject_CallMethod(np, "ascontiguousarray", "O", obj);
            if (!t->copy) return -1;
            continue;
        }
        break;
    }
    int nd = t->view.ndim;
    int pad = 4 - nd; /* a 2-D mask is [1, 1, Sq, Sk] */
    int64_t cap = 1;
    bool empty = false;
    for (int i = 0; i < 4; i++) {
        if (i < pad) {
            t->shape[i] = 1;
            t->stride[i] = 0;
            continue;
        }
        t->shape[i] = t->view.shape[i - pad];
        t->stride[i] = t->view.strides[i - pad] / 4;
        if (t->shape[i] <= 1) t->stride[i] = 0; /* never stepped: numpy may give any stride there */
        if (t->shape[i] == 0) empty = true;
        else if (t->stride[i] > 0) cap += (t->shape[i] - 1) * t->stride[i];
    }
    t->ndim = nd;
    t->capacity = empty ? 0 : cap;
    t->data = t->view.buf;
    return 0;
}

static modattn_tensor to_tensor(const arg_tensor *a) {
    modattn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = a->data;
    t.dtype = MODATTN_DTYPE_F32;
    t.device.kind = MODATTN_DEVICE_CPU;
    for (int i = 0; i < 4; i++) {
        t.shape[i] = a->shape[i];
        t.stride[i] = a->stride[i];
    }
    t.capacity = a->capacity;
    return t;
}

/* kv_lens: any sequence of ints (a list, an int array) into int32. 0 / -1. */
static int kv_lens_get(PyObject *obj, int32_t **out, Py_ssize_t *n) {
    PyObject *seq = PySequence_Fast(obj, "kv_lens must be a sequence of ints (one per batch entry)");
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *idx = PyNumber_Index(it);
        long long v = idx ? PyLong_AsLongLong(idx) : -1;
        Py_XDECREF(idx);
        if (!idx || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            pm_invalid("kv_lens[%zd] is not an integer", i);
            goto fail;
        }
        if (v < INT32_MIN || v > INT32_MAX) {
            pm_invalid("kv_lens[%zd] = %lld is out of range", i, v);
            goto fail;
        }
        (*out)[i] = (int32_t)v;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    PyMem_Free(*out);
    *out = NULL;
    return -1;
}

/* scale=None: 1/sqrt(D) (the contract's 0); otherwise a finite, non-zero float. */
static int scale_get(PyObject *obj, float *out) {
    *out = 0.0f;
    if (!obj || obj == Py_None) return 0;
    double s = PyFloat_AsDouble(obj);
    if (s == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(s) || s == 0.0 || !isfinite((float)s) || (float)s == 0.0f) {
        pm_invalid("scale=%R: expected a finite, non-zero float (None: 1/sqrt(D))", obj);
        return -1;
    }
    *out = (float)s;
    return 0;
}

/* ------------------------------------------------------------------ attention */

PyObject *pm_attention(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"q", "k", "v", "causal", "mask", "kv_lens", "scale", "return_lse", "backend", NULL};
    PyObject *qo, *ko, *vo, *mask_o = Py_None, *kvl_o = Py_None, *scale_o = Py_None;
    int causal = 0, ret_lse = 0;
    const char *backend = "auto";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$pOOOps:attention", kwlist, &qo, &ko, &vo, &causal, &mask_o,
                                     &kvl_o, &scale_o, &ret_lse, &backend))
        return NULL;
    arg_tensor q, k, v, mk;
    memset(&q, 0, sizeof q), memset(&k, 0, sizeof k), memset(&v, 0, sizeof v), memset(&mk, 0, sizeof mk);
    int32_t *kvl = NULL;
    Py_ssize_t nkvl = 0;
    float scale = 0;
    PyObject *out = NULL, *lse = NULL, *result = NULL;
    Py_buffer ov, lv;
    bool have_ov = false, have_lv = false;
    modattn_session *session = NULL;
    pm_policy *pol = NULL;
    if (tensor_get(qo, "q", 4, false, &q) < 0 || tensor_get(ko, "k", 4, false, &k) < 0 ||
        tensor_get(vo, "v", 4, false, &v) < 0)
        goto done;
    if (mask_o != Py_None && tensor_get(mask_o, "mask", 4, true, &mk) < 0) goto done;
    if (kvl_o != Py_None) {
        if (kv_lens_get(kvl_o, &kvl, &nkvl) < 0) goto done;
        if (nkvl != q.shape[0]) {
            pm_invalid("kv_lens has %zd entries, expected B = %lld (one per batch entry)",
                         nkvl, (long long)q.shape[0]);
            goto done;
        }
    }
    if (scale_get(scale_o, &scale) < 0) goto done;
    Py_ssize_t oshape[4] = {(Py_ssize_t)q.shape[0], (Py_ssize_t)q.shape[1], (Py_ssize_t)q.shape[2],
                            (Py_ssize_t)v.shape[3]};
    if (!(out = pm_empty_f32(4, oshape)) || pm_writable_f32(out, &ov) < 0) goto done;
    have_ov = true;
    if (ret_lse) {
        if (!(lse = pm_empty_f32(3, oshape)) || pm_writable_f32(lse, &lv) < 0) goto done;
        have_lv = true;
    }
    modattn_attn_call call;
    memset(&call, 0, sizeof call);
    call.q = to_tensor(&q);
    call.k = to_tensor(&k);
    call.v = to_tensor(&v);
    call.o = modattn_tensor_contiguous(ov.buf, MODATTN_DTYPE_F32, oshape[0], oshape[1], oshape[2], oshape[3]);
    if (mk.have) call.mask = to_tensor(&mk);
    if (have_lv) call.lse = modattn_tensor_contiguous(lv.buf, MODATTN_DTYPE_F32, oshape[0], oshape[1], oshape[2], 1);
    call.kv_lens = kvl;
    call.scale = scale;
    call.causal = causal != 0;
    /* an empty output has nothing to compute, but the call is still checked */
    if (!(pol = pm_policy_get(backend))) goto done;
    if (pm_sessions_take(&pol->sessions, pol->ctx, &session) < 0) goto done;
    pm_error e;
    int st;
    PM_BEGIN_CALL
    st = modattn_session_attention(session, &call);
    if (st) pm_capture(&e, st);
    PM_END_CALL
    if (st) {
        pm_raise(&e, NULL);
        goto done;
    }
    if (ret_lse) result = PyTuple_Pack(2, out, lse);
    else {
        Py_INCREF(out);
        result = out;
    }
done:
    if (session) pm_sessions_give(&pol->sessions, session);
    if (have_ov) PyBuffer_Release(&ov);
    if (have_lv) PyBuffer_Release(&lv);
    Py_XDECREF(out);
    Py_XDECREF(lse);
    tensor_release(&q);
    tensor_release(&k);
    tensor_release(&v);
    tensor_release(&mk);
    PyMem_Free(kvl);
    return result;
}

/* ------------------------------------------------------------------ explain */

/* An array (read as a tensor) or a shape: a sequence of `ndim` non-negative ints. */
static int shape_or_tensor(PyObject *obj, const char *what, bool allow2, arg_tensor *t, int64_t shape[4],
                           bool *inner1) {
    memset(t, 0, sizeof *t);
    if (PyObject_CheckBuffer(obj)) {
        if (tensor_get(obj, what, 4, allow2, t) < 0) return -1;
        memcpy(shape, t->shape, sizeof t->shape);
        if (t->shape[3] > 1 && t->stride[3] != 1) *inner1 = false;
        return 0;
    }
    PyObject *seq = PySequence_Fast(obj, "");
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : -1;
    if (!seq || !(n == 4 || (allow2 && n == 2))) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a float32 array or a shape of %s ints, not %.100s", what,
                     allow2 ? "4 or 2" : "4", Py_TYPE(obj)->tp_name);
        return -1;
    }
    for (int i = 0; i < 4; i++) shape[i] = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((x == -1 && PyErr_Occurred()) || x < 0) {
            PyErr_Clear();
            Py_DECREF(seq);
            pm_invalid("%s: dimension %zd of the shape is not a non-negative int", what, i);
            return -1;
        }
        shape[4 - n + i] = x;
    }
    Py_DECREF(seq);
    return 0;
}

/* A device name ("cpu", "opencl", "opencl:1") into its identity; NULL or "cpu": the CPU.
 * 0, or -1 with an exception. */
static int device_get(const char *name, const modattn_device_iface **out) {
    *out = NULL;
    if (!name || !*name || strcmp(name, "cpu") == 0 || strcmp(name, "auto") == 0) return 0;
    pm_error e;
    int st;
    PM_BEGIN_CALL /* the first look finds the devices (OpenCL platforms) */
    st = modattn_device_lookup(name, out);
    if (st) pm_capture(&e, st);
    PM_END_CALL
    if (st) {
        pm_raise(&e, NULL);
        return -1;
    }
    return 0;
}

PyObject *pm_explain(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"q", "k", "v", "causal", "mask", "kv_lens", "scale", "return_lse", "backend", "device",
                             NULL};
    PyObject *qo, *ko, *vo, *mask_o = Py_None, *kvl_o = Py_None, *scale_o = Py_None;
    int causal = 0, ret_lse = 0;
    const char *backend = "auto", *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$pOOOpsz:explain", kwlist, &qo, &ko, &vo, &causal, &mask_o,
                                     &kvl_o, &scale_o, &ret_lse, &backend, &device))
        return NULL;
    const modattn_device_iface *dev = NULL;
    if (device_get(device, &dev) < 0) return NULL;
    arg_tensor q, k, v, mk;
    memset(&q, 0, sizeof q), memset(&k, 0, sizeof k), memset(&v, 0, sizeof v), memset(&mk, 0, sizeof mk);
    int64_t qs[4], ks[4], vs[4], ms[4];
    bool inner1 = true;
    float scale = 0;
    PyObject *result = NULL;
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = NULL;
    if (shape_or_tensor(qo, "q", false, &q, qs, &inner1) < 0 || shape_or_tensor(ko, "k", false, &k, ks, &inner1) < 0 ||
        shape_or_tensor(vo, "v", false, &v, vs, &inner1) < 0)
        goto done;
    if (mask_o != Py_None && shape_or_tensor(mask_o, "mask", true, &mk, ms, &inner1) < 0) goto done;
    if (scale_get(scale_o, &scale) < 0) goto done;
    if (ks[0] != qs[0] || vs[0] != qs[0] || ks[2] != vs[2] || ks[3] != qs[3] || vs[1] != ks[1]) {
        PyErr_Format(pm_InvalidArgumentError,
                     "shapes do not agree: q (B, Hq, Sq, D) = (%lld, %lld, %lld, %lld), k (B, Hkv, Sk, D) = (%lld, "
                     "%lld, %lld, %lld), v (B, Hkv, Sk, Dv) = (%lld, %lld, %lld, %lld)",
                     (long long)qs[0], (long long)qs[1], (long long)qs[2], (long long)qs[3], (long long)ks[0],
                     (long long)ks[1], (long long)ks[2], (long long)ks[3], (long long)vs[0], (long long)vs[1],
                     (long long)vs[2], (long long)vs[3]);
        goto done;
    }
    if (ks[1] == 0 || qs[1] % ks[1] != 0) {
        pm_invalid("Hq (%lld) must be a multiple of Hkv (%lld), and Hkv > 0",
                     (long long)qs[1], (long long)ks[1]);
        goto done;
    }
    modattn_attn_desc d = modattn_attn_desc_make(qs[0], qs[1], ks[1], qs[2], ks[2], qs[3], causal != 0);
    d.Dv = vs[3];
    if (scale != 0) d.scale = scale;
    if (mask_o != Py_None) {
        d.has_mask = true;
        d.mask_b = ms[0];
        d.mask_h = ms[1];
    }
    d.has_lse = ret_lse != 0;
    d.has_kv_lens = kvl_o != Py_None;
    d.inner_contiguous = inner1;
    if (dev) d.device = dev->id;
    pm_policy *pol = pm_policy_get(backend);
    if (!pol) goto done;
    modattn_explain_entry ent[64];
    size_t n = 0;
    pm_error e;
    int st;
    PM_BEGIN_CALL
    st = modattn_explain(pol->ctx, &d, ent, 64, &n);
    if (st) pm_capture(&e, st);
    PM_END_CALL
    if (st && st != MODATTN_EUNSUPPORTED) {
        pm_raise(&e, "explain");
        goto done;
    }
    if (!(f = open_memstream(&text, &tlen))) {
        PyErr_NoMemory();
        goto done;
    }
    char desc[200];
    modattn_attn_desc_format(&d, desc, sizeof desc);
    fprintf(f, "shape: %s\npolicy: %s\n\n", desc, modattn_ctx_policy(pol->ctx));
    for (size_t i = 0; i < n; i++) {
        char rank[16] = "";
        if (ent[i].rank >= 0) snprintf(rank, sizeof rank, "#%d", ent[i].rank + 1);
        fprintf(f, "  %-18s %-12s %-4s %s", ent[i].name, modattn_verdict_name(ent[i].verdict), rank, ent[i].reason);
        if (ent[i].measured_ms >= 0) fprintf(f, " (measured %.3f ms)", ent[i].measured_ms);
        fprintf(f, "\n");
    }
    if (st) fprintf(f, "\nno implementation can run it: %s\n", e.msg);
    const char *tnote = modattn__tune_note(pol->ctx);
    if (tnote && tnote[0]) fprintf(f, "\nwarning: %s\n", tnote);
    if (fclose(f) != 0) {
        f = NULL;
        PyErr_NoMemory();
        goto done;
    }
    f = NULL;
    result = PyUnicode_DecodeUTF8(text, (Py_ssize_t)tlen, "replace");
done:
    if (f) fclose(f);
    free(text);
    tensor_release(&q);
    tensor_release(&k);
    tensor_release(&v);
    tensor_release(&mk);
    return result;
}

/* ------------------------------------------------------------------ check */

static int dict_set(PyObject *d, const char *key, PyObject *v) {
    if (!v) return -1;
    int r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

PyObject *pm_check(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"backend", "configs", "seed", "device", NULL};
    const char *backend, *device = NULL;
    PyObject *configs_o = Py_None, *seed_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$OOz:check", kwlist, &backend, &configs_o, &seed_o, &device))
        return NULL;
    const modattn_device_iface *dev = NULL;
    if (device_get(device, &dev) < 0) return NULL;
    int grid = modattn_conformance_grid_size();
    int configs = 0;
    unsigned long long seed = 0;
    if (configs_o != Py_None) {
        long c = PyLong_AsLong(configs_o);
        if (c == -1 && PyErr_Occurred()) return NULL;
        if (c < 1 || c > 1000000) {
            pm_invalid("configs=%ld: expected 1 to 1000000 (None: all %d)", c, grid);
            return NULL;
        }
        configs = (int)c;
    }
    if (seed_o != Py_None) {
        seed = PyLong_AsUnsignedLongLong(seed_o);
        if (seed == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
    pm_policy *pol = pm_policy_get("auto");
    if (!pol) return NULL;
    char *log = NULL;
    size_t loglen = 0;
    FILE *f = open_memstream(&log, &loglen);
    if (!f) return PyErr_NoMemory();
    modattn_conformance_options o;
    memset(&o, 0, sizeof o);
    o.only = backend;
    o.max_configs = configs;
    o.seed = seed;
    o.log = f;
    if (dev) o.device_index = dev->id.index;
    modattn_conformance_result res[64];
    size_t n = 0;
    pm_error e;
    int st;
    PM_BEGIN_CALL
    pm_lock(pol->own); /* the context's own pool and workspace */
    st = modattn_conformance_run(pol->ctx, &o, res, 64, &n);
    if (st) pm_capture(&e, st);
    pm_unlock(pol->own);
    PM_END_CALL
    fclose(f);
    if (st) {
        free(log);
        /* an unknown name is a bad argument, not a missing file */
        if (st == MODATTN_ENOTFOUND) return pm_raise_as(pm_InvalidArgumentError, st, e.msg);
        return pm_raise(&e, "check");
    }
    PyObject *d = PyDict_New();
    if (!d) {
        free(log);
        return NULL;
    }
    const modattn_conformance_result *r = n ? &res[0] : NULL;
    int shown = configs && configs < grid ? configs : grid;
    char summary[1024];
    snprintf(summary, sizeof summary, "%s: %d passed, %d failed, %d unsupported of %d configurations; worst "
             "error/tolerance %.3f\n", backend, r ? r->passed : 0, r ? r->failed : 0, r ? r->unsupported : 0, shown,
             r ? r->worst_ratio : 0.0);
    PyObject *text = PyUnicode_FromFormat("%s%s%s", log ? log : "", summary,
                                          r && r->failed ? "FAILED\n" : "OK\n");
    free(log);
    if (dict_set(d, "backend", PyUnicode_FromString(r ? r->name : backend)) < 0 ||
        dict_set(d, "passed", PyLong_FromLong(r ? r->passed : 0)) < 0 ||
        dict_set(d, "failed", PyLong_FromLong(r ? r->failed : 0)) < 0 ||
        dict_set(d, "unsupported", PyLong_FromLong(r ? r->unsupported : 0)) < 0 ||
        dict_set(d, "configurations", PyLong_FromLong(shown)) < 0 ||
        dict_set(d, "worst_error_ratio", PyFloat_FromDouble(r ? r->worst_ratio : 0.0)) < 0 ||
        dict_set(d, "first_failure", PyUnicode_DecodeUTF8(r ? r->first_failure : "", (Py_ssize_t)strlen(r ? r->first_failure : ""), "replace")) < 0 ||
        dict_set(d, "unsupported_reason", PyUnicode_DecodeUTF8(r ? r->unsupported_reason : "", (Py_ssize_t)strlen(r ? r->unsupported_reason : ""), "replace")) < 0 ||
        dict_set(d, "ok", PyBool_FromLong(r && r->failed == 0)) < 0 || dict_set(d, "text", text) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* ------------------------------------------------------------------ backends */

PyObject *pm_backends(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"details", NULL};
    int details = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:backends", kwlist, &details)) return NULL;
    pm_policy *pol = pm_policy_get("auto");
    if (!pol) return NULL;
    size_t n = modattn_ctx_impl_count(pol->ctx);
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        modattn_impl_info info;
        if (modattn_ctx_impl_info(pol->ctx, i, &info) != 0) continue;
        PyObject *item;
        if (!details) {
            item = PyUnicode_FromString(info.name);
        } else {
            item = PyDict_New();
            if (item &&
                (dict_set(item, "name", PyUnicode_FromString(info.name)) < 0 ||
                 dict_set(item, "description", PyUnicode_DecodeUTF8(info.description ? info.description : "", (Py_ssize_t)strlen(info.description ? info.description : ""), "replace")) < 0 ||
                 dict_set(item, "device", PyUnicode_FromString(modattn_device_kind_name(info.device))) < 0 ||
                 dict_set(item, "priority", PyLong_FromLong(info.priority)) < 0 ||
                 dict_set(item, "available", PyBool_FromLong(info.available)) < 0 ||
                 dict_set(item, "reason", PyUnicode_DecodeUTF8(info.reason, (Py_ssize_t)strlen(info.reason), "replace")) < 0 ||
                 dict_set(item, "origin", PyUnicode_DecodeFSDefault(info.origin ? info.origin : "")) < 0))
                Py_CLEAR(item);
        }
        if (!item || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
}
