/* python/src/module.c — the module modattn._modattn: its methods and init (the shared helpers are
 * in common.c, so that model.c, attention.c and store.c never call back into this file). */
#include "pymodattn.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"attention", (PyCFunction)(void (*)(void))pm_attention, METH_VARARGS | METH_KEYWORDS,
     "attention(q, k, v, *, causal=False, mask=None, kv_lens=None, scale=None, return_lse=False, "
     "backend='auto')\n--\n\n"
     "softmax(scale * q k^T + mask) v on float32 arrays of shape (B, H, S, D); see modattn.attention."},
    {"explain", (PyCFunction)(void (*)(void))pm_explain, METH_VARARGS | METH_KEYWORDS,
     "explain(q, k, v, *, causal=False, mask=None, kv_lens=None, scale=None, return_lse=False, "
     "backend='auto', device=None)\n--\n\n"
     "The dispatcher's choice for such a call, and why each other implementation would not run it."},
    {"check", (PyCFunction)(void (*)(void))pm_check, METH_VARARGS | METH_KEYWORDS,
     "check(backend, *, configs=None, seed=None, device=None)\n--\n\n"
     "Runs the conformance suite on one attention implementation; returns a summary dict."},
    {"backends", (PyCFunction)(void (*)(void))pm_backends, METH_VARARGS | METH_KEYWORDS,
     "backends(details=False)\n--\n\n"
     "The registered attention implementations: names, or dicts with details=True."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "modattn._modattn",
    "The C extension behind the modattn package (import modattn instead).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

/* An exception class modattn.NAME with the given bases, added to the module. */
static PyObject *new_exc(PyObject *m, const char *name, const char *doc, PyObject *base1, PyObject *base2) {
    char full[96];
    snprintf(full, sizeof full, "modattn.%s", name);
    PyObject *bases = base2 ? PyTuple_Pack(2, base1, base2) : PyTuple_Pack(1, base1);
    if (!bases) return NULL;
    PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    Py_DECREF(bases);
    if (!cls) return NULL;
    Py_INCREF(cls);
    if (PyModule_AddObject(m, name, cls) < 0) {
        Py_DECREF(cls);
        Py_DECREF(cls);
        return NULL;
    }
    return cls; /* the module holds one reference, the global the other */
}

PyMODINIT_FUNC PyInit__modattn(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (!(pm_Error = new_exc(m, "Error",
                             "An error reported by the modattn library. Attributes: status (the negative "
                             "modattn_status), code (its name, e.g. 'MODATTN_EINVAL').",
                             PyExc_Exception, NULL)))
        goto fail;
    if (!(pm_InvalidArgumentError = new_exc(m, "InvalidArgumentError",
                                            "An invalid argument or a value out of range (MODATTN_EINVAL, "
                                            "MODATTN_ERANGE); also a ValueError.",
                                            pm_Error, PyExc_ValueError)) ||
        !(pm_FormatError = new_exc(m, "FormatError", "A malformed file or input (MODATTN_EFORMAT); also a ValueError.",
                                   pm_Error, PyExc_ValueError)) ||
        !(pm_NotFoundError = new_exc(m, "NotFoundError",
                                     "A file, model, store or device that is not there (MODATTN_ENOTFOUND); also "
                                     "a FileNotFoundError.",
                                     pm_Error, PyExc_FileNotFoundError)) ||
        !(pm_OutOfMemoryError = new_exc(m, "OutOfMemoryError",
                                        "Out of memory or over the memory budget (MODATTN_ENOMEM, "
                                        "MODATTN_EBUDGET); also a MemoryError.",
                                        pm_Error, PyExc_MemoryError)) ||
        !(pm_UnsupportedError = new_exc(m, "UnsupportedError",
                                        "Not supported here: an architecture, a pooling mode, a shape no "
                                        "implementation runs (MODATTN_EUNSUPPORTED).",
                                        pm_Error, NULL)) ||
        !(pm_ModelMismatchError = new_exc(m, "ModelMismatchError",
                                          "A store made with another model, or a version this build does not "
                                          "know (MODATTN_EVERSION).",
                                          pm_Error, NULL)) ||
        !(pm_InputOutputError = new_exc(m, "InputOutputError",
                                        "Reading or writing failed (MODATTN_EIO); also an OSError.", pm_Error,
                                        PyExc_OSError)))
        goto fail;
    if (PyType_Ready(&pm_ModelType) < 0 || PyType_Ready(&pm_StoreType) < 0 || PyType_Ready(&pm_CrossEncoderType) < 0 ||
        PyType_Ready(&pm_SparseEncoderType) < 0)
        goto fail;
    Py_INCREF(&pm_SparseEncoderType);
    if (PyModule_AddObject(m, "SparseEncoder", (PyObject *)&pm_SparseEncoderType) < 0) {
        Py_DECREF(&pm_SparseEncoderType);
        goto fail;
    }
    Py_INCREF(&pm_CrossEncoderType);
    if (PyModule_AddObject(m, "CrossEncoder", (PyObject *)&pm_CrossEncoderType) < 0) {
        Py_DECREF(&pm_CrossEncoderType);
        goto fail;
    }
    Py_INCREF(&pm_ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&pm_ModelType) < 0) {
        Py_DECREF(&pm_ModelType);
        goto fail;
    }
    Py_INCREF(&pm_StoreType);
    if (PyModule_AddObject(m, "Store", (PyObject *)&pm_StoreType) < 0) {
        Py_DECREF(&pm_StoreType);
        goto fail;
    }
    if (PyModule_AddStringConstant(m, "__version__", MODATTN_VERSION_STRING) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "DEFAULT_BATCH_TOKENS", MODATTN_MODEL_DEFAULT_BATCH_TOKENS) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
