/* python/src/common.c — what the binding's files share: exceptions and modattn's errors as them,
 * numpy at run time, the session free lists and the attention contexts of each policy. The
 * module's init (module.c) calls the other files; they call only this one. */
#include "pymodattn.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/internal_core.h"

PyObject *pm_Error, *pm_InvalidArgumentError, *pm_FormatError, *pm_NotFoundError, *pm_OutOfMemoryError,
    *pm_UnsupportedError, *pm_ModelMismatchError, *pm_InputOutputError;

/* ------------------------------------------------------------------ errors */

int pm_capture(pm_error *e, int status) {
    const char *m = modattn_last_error();
    e->status = status;
    snprintf(e->msg, sizeof e->msg, "%s", (m && *m) ? m : modattn_strerror(status));
    return status;
}

int pm_capture_msg(pm_error *e, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    return status;
}

PyObject *pm_error_class(int status) {
    switch (status) {
    case MODATTN_EINVAL:
    case MODATTN_ERANGE: return pm_InvalidArgumentError;
    case MODATTN_EFORMAT: return pm_FormatError;
    case MODATTN_ENOTFOUND: return pm_NotFoundError;
    case MODATTN_ENOMEM:
    case MODATTN_EBUDGET: return pm_OutOfMemoryError;
    case MODATTN_EUNSUPPORTED: return pm_UnsupportedError;
    case MODATTN_EVERSION: return pm_ModelMismatchError;
    case MODATTN_EIO: return pm_InputOutputError;
    default: return pm_Error;
    }
}

PyObject *pm_raise_as(PyObject *cls, int status, const char *msg) {
    /* Messages are UTF-8 from the library but may quote bytes of file names that are not:
     * decode with "replace" so that raising never fails on them. */
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text) return NULL;
    PyObject *exc = PyObject_CallFunctionObjArgs(cls, text, NULL);
    Py_DECREF(text);
    if (!exc) return NULL;
    PyObject *st = PyLong_FromLong(status);
    PyObject *code = PyUnicode_FromString(modattn_status_name(status));
    if (!st || !code || PyObject_SetAttrString(exc, "status", st) < 0 ||
        PyObject_SetAttrString(exc, "code", code) < 0) {
        Py_XDECREF(st);
        Py_XDECREF(code);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(st);
    Py_DECREF(code);
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *pm_invalid(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!msg) return NULL;
    const char *u = PyUnicode_AsUTF8(msg);
    if (u) pm_raise_as(pm_InvalidArgumentError, MODATTN_EINVAL, u);
    Py_DECREF(msg);
    return NULL;
}

PyObject *pm_raise(const pm_error *e, const char *context) {
    if (!context) return pm_raise_as(pm_error_class(e->status), e->status, e->msg);
    size_t n = strlen(context) + strlen(e->msg) + 3;
    char *buf = PyMem_Malloc(n);
    if (!buf) return PyErr_NoMemory();
    snprintf(buf, n, "%s: %s", context, e->msg);
    pm_raise_as(pm_error_class(e->status), e->status, buf);
    PyMem_Free(buf);
    return NULL;
}

PyObject *pm_fsdecode(const char *s) {
    return PyUnicode_DecodeFSDefault(s ? s : "");
}

/* ------------------------------------------------------------------ numpy */

static PyObject *g_numpy;

PyObject *pm_numpy(void) {
    if (g_numpy) return g_numpy;
    g_numpy = PyImport_ImportModule("numpy");
    if (!g_numpy) {
        PyObject *why = pm_exc_value();
        PyErr_Format(PyExc_ImportError, "modattn needs numpy for its arrays (pip install numpy): %S",
                     why ? why : Py_None);
        Py_XDECREF(why);
    }
    return g_numpy;
}

PyObject *pm_empty_f32(int ndim, const Py_ssize_t *shape) {
    PyObject *np = pm_numpy();
    if (!np) return NULL;
    PyObject *tup = PyTuple_New(ndim);
    if (!tup) return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *d = PyLong_FromSsize_t(shape[i]);
        if (!d) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, d);
    }
    PyObject *arr = PyObject_CallMethod(np, "empty", "Os", tup, "float32");
    Py_DECREF(tup);
    return arr;
}

int pm_writable_f32(PyObject *arr, Py_buffer *view) {
    if (PyObject_GetBuffer(arr, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (view->itemsize != 4 || !(strcmp(f, "f") == 0 || strcmp(f, "<f") == 0 || strcmp(f, "=f") == 0)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_SystemError, "numpy.empty(dtype=float32) did not give float32 memory");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ sessions */

#define PM_SESSIONS_KEPT 8

int pm_sessions_take(pm_sessions *s, modattn_ctx *ctx, modattn_session **out) {
    if (s->n > 0) {
        *out = s->items[--s->n];
        return 0;
    }
    modattn_session_options o;
    memset(&o, 0, sizeof o);
    o.threads = s->threads;
    pm_error e;
    int st;
    PM_BEGIN_CALL
    st = modattn_session_create(ctx, &o, out);
    if (st) pm_capture(&e, st);
    PM_END_CALL
    if (st) {
        pm_raise(&e, "creating a session");
        return -1;
    }
    return 0;
}

void pm_sessions_give(pm_sessions *s, modattn_session *session) {
    if (!session) return;
    if (s->n == s->cap && s->cap < PM_SESSIONS_KEPT) {
        size_t cap = s->cap ? s->cap * 2 : 2;
        if (cap > PM_SESSIONS_KEPT) cap = PM_SESSIONS_KEPT;
        modattn_session **items = PyMem_Realloc(s->items, cap * sizeof *items);
        if (items) {
            s->items = items;
            s->cap = cap;
        }
    }
    if (s->n < s->cap) s->items[s->n++] = session;
    else modattn_session_free(session);
}

void pm_sessions_clear(pm_sessions *s) {
    for (size_t i = 0; i < s->n; i++) modattn_session_free(s->items[i]);
    PyMem_Free(s->items);
    s->items = NULL;
    s->n = s->cap = 0;
}

/* ------------------------------------------------------------------ policies */

static pm_policy *g_policies;
static pid_t g_policies_pid;

pm_policy *pm_policy_get(const char *name) {
    if (!name || !*name) name = "auto";
    if (g_policies_pid != getpid()) {
        /* first use, or a forked child: the parent's contexts have no threads here; they are
         * left as they are (freeing them would wait for threads that do not exist) */
        g_policies = NULL;
        g_policies_pid = getpid();
    }
    for (pm_policy *p = g_policies; p; p = p->next)
        if (strcmp(p->name, name) == 0) return p;
    pm_policy *p = PyMem_Calloc(1, sizeof *p);
    char *copy = PyMem_Malloc(strlen(name) + 1);
    PyThread_type_lock own = PyThread_allocate_lock();
    if (!p || !copy || !own) {
        PyMem_Free(p);
        PyMem_Free(copy);
        if (own) PyThread_free_lock(own);
        PyErr_NoMemory();
        return NULL;
    }
    strcpy(copy, name);
    pm_error e;
    int st = 0;
    modattn_ctx *ctx = NULL;
    PM_BEGIN_CALL
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.policy = copy; /* threads 0, its own pool: one thread per online CPU */
    st = modattn_ctx_create(&o, &ctx);
    if (st) pm_capture(&e, st);
    PM_END_CALL
    /* Contexts of policies are kept until the process ends. */
    if (st) {
        PyMem_Free(p);
        PyMem_Free(copy);
        PyThread_free_lock(own);
        pm_raise(&e, NULL);
        return NULL;
    }
    /* another thread may have made the same policy meanwhile: use the first */
    for (pm_policy *q = g_policies; q; q = q->next)
        if (strcmp(q->name, name) == 0) {
            modattn_ctx_free(ctx);
            PyMem_Free(p);
            PyMem_Free(copy);
            PyThread_free_lock(own);
            return q;
        }
    p->name = copy;
    p->ctx = ctx;
    p->own = own;
    p->sessions.threads = 0;
    p->next = g_policies;
    g_policies = p;
    return p;
}


int pm_head_init(pm_head *h, PyObject *args, PyObject *kw, const char *fmt, int loaded, const char *what,
                 pm_head_load_fn load, void *out) {
    static char *kwlist[] = {"model_name_or_path", "device", "threads", NULL};
    PyObject *path_obj = NULL, *threads_obj = Py_None;
    const char *device = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &path_obj, &device, &threads_obj)) return -1;
    const char *cls = strchr(fmt, ':') + 1;
    if (loaded) {
        PyErr_Format(PyExc_RuntimeError, "%s.__init__ called twice: make a new one instead", cls);
        return -1;
    }
    int threads = 0;
    if (threads_obj != Py_None) {
        long t = PyLong_AsLong(threads_obj);
        if (t == -1 && PyErr_Occurred()) return -1;
        if (t < 0 || t > 1024) {
            pm_invalid("threads=%ld: expected None (one per CPU) or 0 to 1024", t);
            return -1;
        }
        threads = (int)t;
    }
    PyObject *fs = NULL;
    if (!PyUnicode_FSConverter(path_obj, &fs)) return -1;
    PyObject *path_str = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(fs));
    if (!path_str) {
        Py_DECREF(fs);
        return -1;
    }
    h->lock = PyThread_allocate_lock();
    if (!h->lock) {
        Py_DECREF(fs), Py_DECREF(path_str);
        PyErr_NoMemory();
        return -1;
    }
    const char *dir = PyBytes_AS_STRING(fs);
    const char *dev = (!*device || strcmp(device, "auto") == 0) ? "cpu" : device;
    pm_error e;
    int st = 0;
    PM_BEGIN_CALL
    if ((st = modattn__pool_create(threads, &h->pool))) pm_capture(&e, st);
    else {
        modattn_ctx_options co;
        memset(&co, 0, sizeof co);
        co.pool = h->pool;
        if ((st = modattn_ctx_create(&co, &h->ctx))) pm_capture(&e, st);
        else {
            modattn_model_options mo;
            memset(&mo, 0, sizeof mo);
            mo.device = dev;
            mo.pool = h->pool;
            if ((st = load(h->ctx, dir, &mo, out))) pm_capture(&e, st);
        }
    }
    PM_END_CALL
    Py_DECREF(fs);
    if (st) {
        Py_DECREF(path_str);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "loading %s", what);
        pm_raise(&e, ctx);
        return -1;
    }
    h->path = path_str;
    h->pid = getpid();
    return 0;
}

void pm_head_free(pm_head *h, void (*free_model)(void *), void *model) {
    if (!h->pid || h->pid == getpid()) {
        free_model(model);
        modattn_ctx_free(h->ctx);
        modattn__pool_free(h->pool);
    }
    if (h->lock) PyThread_free_lock(h->lock);
    Py_CLEAR(h->path);
}

int pm_head_check(const pm_head *h, int loaded, const char *cls) {
    if (!loaded) {
        PyErr_Format(PyExc_ValueError, "the %s is not loaded (its __init__ failed or was not called)", cls);
        return -1;
    }
    if (h->pid != getpid()) {
        PyErr_Format(PyExc_RuntimeError, "this %s was loaded in the parent of this forked process: load it in the child",
                     cls);
        return -1;
    }
    return 0;
}
