/* python/src/sparse.c — modattn._modattn.SparseEncoder: a SPLADE model directory (modattn/sparse.h)
 * loaded by the library; encode() gives each text's non-zero weights as sentence-transformers'
 * SparseEncoder.encode does, as {token_id: weight} dicts (no torch or scipy needed).
 * modattn.SparseEncoder (python/modattn/__init__.py) adds decode() and the encode_query /
 * encode_document names.
 *
 * A SparseEncoder owns a thread pool, a context and the model; one call at a time runs on it (a
 * lock, taken with the GIL released), the GIL released while the model runs. */
#include "pymodattn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/sparse.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"

typedef struct pm_sparse {
    PyObject_HEAD
    pm_head h; /* pool, context, lock, path, pid (common.c) */
    modattn_sparse_encoder *e;
    const modattn_sparse_info *info;
} pm_sparse;

static void sparse_free_model(void *m) { modattn_sparse_free(m); }

modattn_sparse_encoder *pm_sparse_get(PyObject *o, PyThread_type_lock *lock) {
    if (!PyObject_TypeCheck(o, &pm_SparseEncoderType)) {
        PyErr_Format(PyExc_TypeError, "sparse: expected a modattn.SparseEncoder, not %s", Py_TYPE(o)->tp_name);
        return NULL;
    }
    pm_sparse *self = (pm_sparse *)o;
    if (pm_head_check(&self->h, self->e != NULL, "SparseEncoder") < 0) return NULL;
    *lock = self->h.lock;
    return self->e;
}

static void sparse_dealloc(pm_sparse *self) {
    pm_head_free(&self->h, sparse_free_model, self->e);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int sparse_load(modattn_ctx *ctx, const char *dir, const modattn_model_options *mo, void *out) {
    return modattn_sparse_load(ctx, dir, mo, (modattn_sparse_encoder **)out);
}

static int sparse_init(pm_sparse *self, PyObject *args, PyObject *kw) {
    if (pm_head_init(&self->h, args, kw, "O|sO:SparseEncoder", self->e != NULL, "the SPLADE model", sparse_load,
                     &self->e))
        return -1;
    self->info = modattn_sparse_get_info(self->e);
    return 0;
}

static pm_sparse *sparse_check(PyObject *o) {
    pm_sparse *c = (pm_sparse *)o;
    return pm_head_check(&c->h, c->e != NULL, "SparseEncoder") ? NULL : c;
}

static PyObject *vec_dict(const modattn_sparse_vec *v) {
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < v->n; k++) {
        PyObject *key = PyLong_FromLong(v->ids[k]), *val = PyFloat_FromDouble((double)v->weights[k]);
        if (!key || !val || PyDict_SetItem(d, key, val) < 0) Py_CLEAR(d);
        Py_XDECREF(key), Py_XDECREF(val);
    }
    return d;
}

/* encode(sentences, batch_size=32, show_progress_bar=None, max_active_dims=None, threshold=0.0):
 * a {token_id: weight} dict per text (ids ascending), a list for a list, one dict for one text */
static PyObject *sparse_encode(PyObject *o, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"sentences", "batch_size", "show_progress_bar", "max_active_dims", "threshold", NULL};
    PyObject *sent = NULL, *spb = Py_None, *mad = Py_None;
    Py_ssize_t batch_size = 32;
    double threshold = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|nOOd:encode", kwlist, &sent, &batch_size, &spb, &mad, &threshold))
        return NULL;
    (void)spb;
    pm_sparse *self = sparse_check(o);
    if (!self) return NULL;
    if (batch_size < 1) return pm_invalid("batch_size=%zd: must be at least 1", batch_size);
    modattn_sparse_options opt = {0};
    if (mad != Py_None) {
        long k = PyLong_AsLong(mad);
        if (k == -1 && PyErr_Occurred()) return NULL;
        if (k < 1) return pm_invalid("max_active_dims=%ld: None, or at least 1", k);
        opt.top_k = (size_t)k;
    }
    if (!(threshold >= 0) || isinf(threshold)) return pm_invalid("threshold=%g: a finite weight >= 0", threshold);
    opt.threshold = (float)threshold;
    const bool single = pm_is_text(sent);
    PyObject *seq = single ? Py_BuildValue("[O]", sent) : PySequence_Fast(sent, "sentences must be a text or a list of texts");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **keep = PyMem_Calloc((size_t)n + 1, sizeof *keep);
    const char **t = PyMem_Calloc((size_t)n + 1, sizeof *t);
    size_t *tl = PyMem_Calloc((size_t)n + 1, sizeof *tl);
    modattn_sparse_vec *out = PyMem_Calloc((size_t)n + 1, sizeof *out);
    PyObject *result = NULL;
    if (!keep || !t || !tl || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "sentences[%zd]", i);
        if (!(keep[i] = pm_text_bytes(PySequence_Fast_GET_ITEM(seq, i), what, &t[i], &tl[i]))) goto done;
    }
    pm_error e;
    int st = 0;
    PM_BEGIN_CALL
    PyThread_acquire_lock(self->h.lock, WAIT_LOCK);
    for (Py_ssize_t i = 0; i < n && !st; i += batch_size) {
        size_t m = (size_t)(n - i < batch_size ? n - i : batch_size);
        if ((st = modattn_sparse_encode(self->e, NULL, t + i, tl + i, m, &opt, out + i, NULL))) pm_capture(&e, st);
    }
    PyThread_release_lock(self->h.lock);
    PM_END_CALL
    if (st) {
        pm_raise(&e, "encode");
        goto done;
    }
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++) {
        PyObject *d = vec_dict(&out[i]);
        if (!d) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, d);
    }
    if (result && single) {
        PyObject *one = PyList_GET_ITEM(result, 0);
        Py_INCREF(one);
        Py_DECREF(result);
        result = one;
    }
done:
    if (out) modattn_sparse_vec_free(out, (size_t)n);
    for (Py_ssize_t i = 0; keep && i < n; i++) Py_XDECREF(keep[i]);
    PyMem_Free(keep), PyMem_Free(t), PyMem_Free(tl), PyMem_Free(out);
    Py_DECREF(seq);
    return result;
}

/* convert_ids_to_tokens(ids): each id's string in the vocabulary */
static PyObject *sparse_tokens(PyObject *o, PyObject *arg) {
    pm_sparse *self = sparse_check(o);
    if (!self) return NULL;
    PyObject *seq = PySequence_Fast(arg, "ids must be a list of token ids");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const modattn_tokenizer *tok = modattn_model_tokenizer(modattn_sparse_model(self->e));
    PyObject *res = PyList_New(n);
    for (Py_ssize_t i = 0; res && i < n; i++) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (id == -1 && PyErr_Occurred()) {
            Py_CLEAR(res);
            break;
        }
        const char *s = id >= 0 && (size_t)id < self->info->vocab ? modattn_tokenizer_token(tok, (int32_t)id) : NULL;
        if (!s) {
            pm_invalid("ids[%zd] = %ld: not a token id of the vocabulary (0 to %zu)", i, id, self->info->vocab - 1);
            Py_CLEAR(res);
            break;
        }
        PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
        if (!u) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, i, u);
    }
    Py_DECREF(seq);
    return res;
}

#define SPARSE_GET(name) \
    static PyObject *get_##name(pm_sparse *self, void *c) { \
        (void)c; \
        if (!sparse_check((PyObject *)self)) return NULL;

SPARSE_GET(vocab_size) return PyLong_FromSize_t(self->info->vocab); }
SPARSE_GET(max_seq_length) return PyLong_FromSize_t(self->info->max_tokens); }
SPARSE_GET(architecture) return PyUnicode_FromString(self->info->architecture); }
SPARSE_GET(pooling) return PyUnicode_FromString(self->info->pooling); }
SPARSE_GET(path) Py_INCREF(self->h.path); return self->h.path; }

static PyGetSetDef sparse_getset[] = {
    {"vocab_size", (getter)get_vocab_size, NULL, "The vectors' dimension (the MLM decoder's rows).", NULL},
    {"max_seq_length", (getter)get_max_seq_length, NULL, "Ids per text, specials included (longer texts are cut).", NULL},
    {"architecture", (getter)get_architecture, NULL, "config.json's architectures[0].", NULL},
    {"pooling", (getter)get_pooling, NULL, "SpladePooling's pooling_strategy: 'max' or 'sum'.", NULL},
    {"path", (getter)get_path, NULL, "The folder as given.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef sparse_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))sparse_encode, METH_VARARGS | METH_KEYWORDS,
     "encode($self, sentences, batch_size=32, show_progress_bar=None, max_active_dims=None, threshold=0.0)\n--\n\n"
     "SPLADE vectors, as sentence-transformers' SparseEncoder.encode: for each text a dict\n"
     "{token_id: weight} of its non-zero weights, ids ascending (a list for a list, one dict for\n"
     "one text). max_active_dims keeps the largest weights; threshold drops those below it. A\n"
     "text's vector does not depend on the others."},
    {"convert_ids_to_tokens", (PyCFunction)sparse_tokens, METH_O,
     "convert_ids_to_tokens($self, ids)\n--\n\nEach token id's string in the model's vocabulary."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pm_SparseEncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "modattn._modattn.SparseEncoder",
    .tp_basicsize = sizeof(pm_sparse),
    .tp_dealloc = (destructor)sparse_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "SparseEncoder(model_name_or_path, device='cpu', threads=None)\n--\n\n"
              "A SPLADE model (a Hugging Face *ForMaskedLM directory) loaded by modattn.",
    .tp_methods = sparse_methods,
    .tp_getset = sparse_getset,
    .tp_init = (initproc)sparse_init,
    .tp_new = PyType_GenericNew,
};
