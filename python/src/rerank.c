/* python/src/rerank.c — modattn._modattn.CrossEncoder: a cross-encoder directory (modattn/rerank.h)
 * loaded by the library; predict() scores (query, passage) pairs as sentence-transformers'
 * CrossEncoder.predict does. modattn.CrossEncoder (python/modattn/__init__.py) adds rank().
 *
 * A CrossEncoder owns a thread pool, a context and the reranker; one call at a time runs on it
 * (a lock, taken with the GIL released), the GIL released while the model runs. */
#include "pymodattn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/rerank.h"
#include "core/internal_core.h"

typedef struct pm_cross {
    PyObject_HEAD
    pm_head h; /* pool, context, lock, path, pid (common.c) */
    modattn_reranker *r;
    const modattn_reranker_info *info;
} pm_cross;

static void cross_free_model(void *m) { modattn_reranker_free(m); }

static void cross_dealloc(pm_cross *self) {
    pm_head_free(&self->h, cross_free_model, self->r);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int cross_load(modattn_ctx *ctx, const char *dir, const modattn_model_options *mo, void *out) {
    return modattn_reranker_load(ctx, dir, mo, (modattn_reranker **)out);
}

static int cross_init(pm_cross *self, PyObject *args, PyObject *kw) {
    if (pm_head_init(&self->h, args, kw, "O|sO:CrossEncoder", self->r != NULL, "the cross-encoder", cross_load, &self->r))
        return -1;
    self->info = modattn_reranker_get_info(self->r);
    return 0;
}

static pm_cross *cross_check(PyObject *o) {
    pm_cross *c = (pm_cross *)o;
    return pm_head_check(&c->h, c->r != NULL, "CrossEncoder") ? NULL : c;
}

/* predict(sentences, batch_size=32, show_progress_bar=None, raw=False, convert_to_numpy=True):
 * (n,) scores for one label, (n, L) for more; one pair alone: a scalar / (L,) */
static PyObject *cross_predict(PyObject *o, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"sentences", "batch_size", "show_progress_bar", "raw", "convert_to_numpy", NULL};
    PyObject *sent = NULL, *spb = Py_None;
    Py_ssize_t batch_size = 32;
    int raw = 0, to_numpy = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|nOpp:predict", kwlist, &sent, &batch_size, &spb, &raw, &to_numpy))
        return NULL;
    (void)spb;
    pm_cross *self = cross_check(o);
    if (!self) return NULL;
    if (batch_size < 1) return pm_invalid("batch_size=%zd: must be at least 1", batch_size);
    /* one pair (a, b) or a list of pairs */
    bool single = false;
    if ((PyTuple_Check(sent) || PyList_Check(sent)) && PySequence_Size(sent) == 2) {
        PyObject *x0 = PySequence_GetItem(sent, 0), *x1 = PySequence_GetItem(sent, 1);
        single = x0 && x1 && pm_is_text(x0) && pm_is_text(x1);
        Py_XDECREF(x0), Py_XDECREF(x1);
        PyErr_Clear();
    }
    PyObject *seq = single ? Py_BuildValue("[O]", sent) : PySequence_Fast(sent, "sentences must be a list of (query, passage) pairs");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const size_t L = self->info->num_labels;
    PyObject **keep = PyMem_Calloc((size_t)(2 * n + 1), sizeof *keep);
    const char **a = PyMem_Calloc((size_t)n + 1, sizeof *a), **b = PyMem_Calloc((size_t)n + 1, sizeof *b);
    size_t *al = PyMem_Calloc((size_t)n + 1, sizeof *al), *bl = PyMem_Calloc((size_t)n + 1, sizeof *bl);
    float *out = PyMem_Calloc((size_t)n * L + 1, sizeof *out);
    PyObject *result = NULL;
    if (!keep || !a || !b || !al || !bl || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
        if (!(PyTuple_Check(p) || PyList_Check(p)) || PySequence_Size(p) != 2) {
            PyErr_Format(PyExc_TypeError, "sentences[%zd] is %.100s: a pair is a (query, passage) tuple or list", i,
                         Py_TYPE(p)->tp_name);
            goto done;
        }
        char what[48];
        snprintf(what, sizeof what, "sentences[%zd][0]", i);
        PyObject *x = PySequence_GetItem(p, 0), *y = PySequence_GetItem(p, 1);
        if (x) keep[2 * i] = pm_text_bytes(x, what, &a[i], &al[i]);
        snprintf(what, sizeof what, "sentences[%zd][1]", i);
        if (y && keep[2 * i]) keep[2 * i + 1] = pm_text_bytes(y, what, &b[i], &bl[i]);
        Py_XDECREF(x), Py_XDECREF(y);
        if (!keep[2 * i] || !keep[2 * i + 1]) goto done;
    }
    pm_error e;
    int st = 0;
    PM_BEGIN_CALL
    PyThread_acquire_lock(self->h.lock, WAIT_LOCK);
    for (Py_ssize_t i = 0; i < n && !st; i += batch_size) {
        size_t m = (size_t)(n - i < batch_size ? n - i : batch_size);
        if ((st = modattn_reranker_score(self->r, NULL, a + i, al + i, b + i, bl + i, m, raw ? MODATTN_RERANK_RAW : 0,
                                         out + (size_t)i * L, NULL, NULL)))
            pm_capture(&e, st);
    }
    PyThread_release_lock(self->h.lock);
    PM_END_CALL
    if (st) {
        pm_raise(&e, "predict");
        goto done;
    }
    if (to_numpy) {
        Py_ssize_t shape[2] = {n, (Py_ssize_t)L};
        int nd = L == 1 ? 1 : 2;
        if (single) shape[0] = (Py_ssize_t)L;
        PyObject *arr = single && L == 1 ? NULL : pm_empty_f32(single ? 1 : nd, shape);
        if (single && L == 1) {
            PyObject *np = pm_numpy();
            result = np ? PyObject_CallMethod(np, "float32", "d", (double)out[0]) : NULL;
            goto done;
        }
        if (!arr) goto done;
        Py_buffer v;
        if (pm_writable_f32(arr, &v) < 0) {
            Py_DECREF(arr);
            goto done;
        }
        memcpy(v.buf, out, (size_t)n * L * sizeof *out);
        PyBuffer_Release(&v);
        result = arr;
    } else {
        result = PyList_New(n);
        for (Py_ssize_t i = 0; result && i < n; i++) {
            PyObject *v;
            if (L == 1) v = PyFloat_FromDouble(out[i]);
            else {
                v = PyList_New((Py_ssize_t)L);
                for (size_t l = 0; v && l < L; l++) PyList_SET_ITEM(v, (Py_ssize_t)l, PyFloat_FromDouble(out[(size_t)i * L + l]));
            }
            if (!v) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, i, v);
        }
        if (result && single) {
            PyObject *one = PyList_GET_ITEM(result, 0);
            Py_INCREF(one);
            Py_DECREF(result);
            result = one;
        }
    }
done:
    for (Py_ssize_t i = 0; keep && i < 2 * n; i++) Py_XDECREF(keep[i]);
    PyMem_Free(keep), PyMem_Free(a), PyMem_Free(b), PyMem_Free(al), PyMem_Free(bl), PyMem_Free(out);
    Py_DECREF(seq);
    return result;
}

#define CROSS_GET(name) \
    static PyObject *get_##name(pm_cross *self, void *c) { \
        (void)c; \
        if (!cross_check((PyObject *)self)) return NULL;

CROSS_GET(num_labels) return PyLong_FromSize_t(self->info->num_labels); }
CROSS_GET(max_length) return PyLong_FromSize_t(self->info->max_tokens); }
CROSS_GET(activation) return PyUnicode_FromString(self->info->activation); }
CROSS_GET(architecture) return PyUnicode_FromString(self->info->architecture); }
CROSS_GET(path) Py_INCREF(self->h.path); return self->h.path; }
CROSS_GET(labels)
    PyObject *l = PyList_New((Py_ssize_t)self->info->num_labels);
    for (size_t i = 0; l && i < self->info->num_labels; i++) {
        PyObject *s = PyUnicode_FromString(self->info->labels[i]);
        if (!s) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, s);
    }
    return l;
}

static PyGetSetDef cross_getset[] = {
    {"num_labels", (getter)get_num_labels, NULL, "Scores per pair (config.json num_labels / id2label).", NULL},
    {"max_length", (getter)get_max_length, NULL, "Ids per pair, specials included (longer pairs are cut).", NULL},
    {"activation", (getter)get_activation, NULL, "What predict applies to the logits: 'sigmoid', 'identity' or 'tanh'.", NULL},
    {"architecture", (getter)get_architecture, NULL, "config.json's architectures[0].", NULL},
    {"labels", (getter)get_labels, NULL, "id2label, in order.", NULL},
    {"path", (getter)get_path, NULL, "The folder as given.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef cross_methods[] = {
    {"predict", (PyCFunction)(void (*)(void))cross_predict, METH_VARARGS | METH_KEYWORDS,
     "predict($self, sentences, batch_size=32, show_progress_bar=None, raw=False, convert_to_numpy=True)\n--\n\n"
     "Scores of (query, passage) pairs, as sentence-transformers' CrossEncoder.predict: a float32\n"
     "array (n,) for a one-label model, (n, num_labels) for more; one pair alone gives a scalar\n"
     "(or (num_labels,)). The activation is the model's (sigmoid for one label unless config.json\n"
     "says otherwise); raw=True gives the logits. A pair's score does not depend on the others."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pm_CrossEncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "modattn._modattn.CrossEncoder",
    .tp_basicsize = sizeof(pm_cross),
    .tp_dealloc = (destructor)cross_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "CrossEncoder(model_name_or_path, device='cpu', threads=None)\n--\n\n"
              "A cross-encoder (a Hugging Face *ForSequenceClassification directory) loaded by modattn.",
    .tp_methods = cross_methods,
    .tp_getset = cross_getset,
    .tp_init = (initproc)cross_init,
    .tp_new = PyType_GenericNew,
};
