/* python/src/pymodattn.h — what the files of the extension module modattn._modattn share.
 *
 * The module is plain CPython C API (no numpy headers): numpy is imported at run time only to
 * make result arrays, which are filled through the buffer protocol; input arrays are read
 * through the buffer protocol too. Every long call runs with the GIL released.
 *
 * Thread safety: the free lists of sessions and the list of contexts below are only touched
 * while holding the GIL, which is what guards them; the locks (PyThread_type_lock) guard what
 * the library lets one thread at a time use (a model's own pool, a context's own workspace, a
 * store) and are always taken with the GIL released, so that no thread waits for a lock while
 * holding the GIL. */
#ifndef PYMODATTN_H
#define PYMODATTN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <pthread.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "modattn/store.h"
#include "modattn/ingest.h"
#include "modattn/search.h"

/* ---- errors */

/* The exception classes (owned by the module; created in PyInit__modattn). */
extern PyObject *pm_Error;                /* modattn.Error(Exception): the base of all */
extern PyObject *pm_InvalidArgumentError; /* EINVAL, ERANGE: also ValueError */
extern PyObject *pm_FormatError;          /* EFORMAT: also ValueError */
extern PyObject *pm_NotFoundError;        /* ENOTFOUND: also FileNotFoundError */
extern PyObject *pm_OutOfMemoryError;     /* ENOMEM, EBUDGET: also MemoryError */
extern PyObject *pm_UnsupportedError;     /* EUNSUPPORTED */
extern PyObject *pm_ModelMismatchError;   /* EVERSION (a store of another model, a version) */
extern PyObject *pm_InputOutputError;     /* EIO: also OSError */

/* A library error captured where it happened (possibly without the GIL): the status and a copy
 * of modattn_last_error() of that thread. */
typedef struct pm_error {
    int status;
    char msg[1536];
} pm_error;

/* Records status and the thread's last message into e; returns status. No GIL needed. */
int pm_capture(pm_error *e, int status);
/* The same with a message of our own (no GIL needed). */
int pm_capture_msg(pm_error *e, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Raises the exception for e (class by status; attributes .status and .code), with "context: "
 * before the message when context is not NULL. Returns NULL. GIL held. */
PyObject *pm_raise(const pm_error *e, const char *context);
/* Raises `cls` with message msg and the attributes of `status`. Returns NULL. GIL held. */
PyObject *pm_raise_as(PyObject *cls, int status, const char *msg);
/* Raises InvalidArgumentError (status MODATTN_EINVAL) with a PyUnicode_FromFormat message.
 * Returns NULL. GIL held. */
PyObject *pm_invalid(const char *fmt, ...);
/* The class for a status. */
PyObject *pm_error_class(int status);

/* The pending exception, taken (cleared) and given back: PyErr_Fetch / PyErr_Restore, which
 * Python 3.12 deprecates for PyErr_GetRaisedException / PyErr_SetRaisedException. */
typedef struct pm_exc {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} pm_exc;
static inline void pm_exc_take(pm_exc *e) {
#if PY_VERSION_HEX >= 0x030C0000
    e->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&e->type, &e->value, &e->tb);
#endif
}
static inline void pm_exc_give_back(pm_exc *e) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e->exc);
#else
    PyErr_Restore(e->type, e->value, e->tb);
#endif
}
/* The pending exception's instance (a new reference; NULL if none), cleared. */
static inline PyObject *pm_exc_value(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
#endif
}

/* ---- what a text is, everywhere (Model.encode, Model.tokenize, Store.search): str (its UTF-8),
 * bytes or bytearray (taken as UTF-8; invalid sequences become U+FFFD in the tokenizer, as
 * errors="replace"). Nothing else: not an int, a dict, a number. */
static inline bool pm_is_text(PyObject *o) { return PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o); }
/* A new reference that keeps the text's bytes alive and unchanged while the GIL is released (a
 * bytearray is copied: another thread could resize it), with *p, *n its bytes; NULL with
 * TypeError or ValueError naming `what` (e.g. "texts[3]", "query") otherwise. */
static inline PyObject *pm_text_bytes(PyObject *o, const char *what, const char **p, size_t *n) {
    if (PyUnicode_Check(o)) {
        Py_ssize_t L;
        const char *s = PyUnicode_AsUTF8AndSize(o, &L);
        if (!s) { /* a lone surrogate: not encodable as UTF-8 */
            PyObject *ev = pm_exc_value();
            PyErr_Format(PyExc_ValueError, "%s cannot be encoded as UTF-8: %S", what, ev ? ev : Py_None);
            Py_XDECREF(ev);
            return NULL;
        }
        *p = s, *n = (size_t)L;
        Py_INCREF(o);
        return o;
    }
    if (PyBytes_Check(o) || PyByteArray_Check(o)) {
        PyObject *b = PyBytes_Check(o) ? (Py_INCREF(o), o) : PyBytes_FromObject(o);
        if (!b) return NULL;
        *p = PyBytes_AS_STRING(b), *n = (size_t)PyBytes_GET_SIZE(b);
        return b;
    }
    PyErr_Format(PyExc_TypeError, "%s is %.100s: a text is a str, bytes or bytearray", what, Py_TYPE(o)->tp_name);
    return NULL;
}

/* ---- numpy (imported at run time) */

/* The numpy module (borrowed; imported on first use), or NULL with ImportError set. */
PyObject *pm_numpy(void);
/* numpy.empty(shape, dtype="float32") of ndim dims; NULL with an exception. */
PyObject *pm_empty_f32(int ndim, const Py_ssize_t *shape);
/* A writable C-contiguous float32 view of an array made by pm_empty_f32. 0 or -1. */
int pm_writable_f32(PyObject *arr, Py_buffer *view);

/* ---- sessions: a free list per context, guarded by the GIL */

typedef struct pm_sessions {
    modattn_session **items;
    size_t n, cap;
    int threads; /* for new sessions: <= 0 one per online CPU */
} pm_sessions;

/* A free session of ctx, or a new one (GIL held). 0, or -1 with a Python exception set. */
int pm_sessions_take(pm_sessions *s, modattn_ctx *ctx, modattn_session **out);
/* Back to the free list (GIL held); beyond a few kept, freed. */
void pm_sessions_give(pm_sessions *s, modattn_session *session);
/* Frees every kept session (GIL held; none may be in use). */
void pm_sessions_clear(pm_sessions *s);

/* ---- attention contexts, one per policy ("auto", "cpu_flash", "a,b", "tune"), never freed */

typedef struct pm_policy {
    char *name;
    modattn_ctx *ctx;
    pm_sessions sessions;
    PyThread_type_lock own; /* the context's own pool and workspace (conformance runs) */
    struct pm_policy *next;
} pm_policy;

/* The context for a policy (made on first use; the policy is checked by the library).
 * NULL with an exception set. GIL held. */
pm_policy *pm_policy_get(const char *name);

/* ---- library calls: the GIL released, asynchronous signals blocked
 *
 * A signal handled on a thread while it runs the library's oneDNN matmul plans corrupts the heap
 * (reproduced in plain C with a no-op SIGUSR1 handler; not with MODATTN_GEMM_PLANS=0), and Python
 * handles SIGINT on whichever thread the kernel picks. So every thread that runs the library on
 * our behalf blocks the asynchronous signals while it does: the calling thread for the length of
 * the call, and the threads the library creates (pools, OpenMP) for good, since they inherit the
 * mask they were created with. A signal that arrives meanwhile goes to another thread or waits,
 * and Python sees it as soon as the call returns (PyErr_CheckSignals). Faults (SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS) stay unblocked. */
static inline void pm_sig_block(sigset_t *old) {
    sigset_t s;
    sigfillset(&s);
    sigdelset(&s, SIGSEGV);
    sigdelset(&s, SIGBUS);
    sigdelset(&s, SIGFPE);
    sigdelset(&s, SIGILL);
    sigdelset(&s, SIGTRAP);
    sigdelset(&s, SIGABRT);
    sigdelset(&s, SIGSYS);
    pthread_sigmask(SIG_BLOCK, &s, old);
}
static inline void pm_sig_restore(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }
#define PM_BEGIN_CALL                 \
    {                                 \
        sigset_t pm__sigs;            \
        Py_BEGIN_ALLOW_THREADS        \
        pm_sig_block(&pm__sigs);
#define PM_END_CALL                   \
        pm_sig_restore(&pm__sigs);    \
        Py_END_ALLOW_THREADS          \
    }

/* Takes lock with the GIL released (call only while the GIL is released). */
static inline void pm_lock(PyThread_type_lock l) { PyThread_acquire_lock(l, WAIT_LOCK); }
static inline void pm_unlock(PyThread_type_lock l) { PyThread_release_lock(l); }

/* ---- types and functions of each file */

typedef struct pm_model {
    PyObject_HEAD
    modattn_pool *pool;
    modattn_ctx *ctx;
    modattn_model *model;
    const modattn_model_info *info;
    int threads;             /* as asked: <= 0 the library's default */
    PyThread_type_lock own;  /* the model's own pool and its ctx's workspace: modattn_model_embed
                              * (store indexing and searching) */
    pm_sessions sessions;    /* for encode: one per concurrent caller */
    PyObject *path;          /* str, as given */
    PyObject *device;        /* str */
    PyObject *backend;       /* str */
    pid_t pid;               /* the process that loaded it: its threads do not exist in a fork */
} pm_model;

extern PyTypeObject pm_ModelType;
extern PyTypeObject pm_StoreType;
extern PyTypeObject pm_CrossEncoderType; /* rerank.c */
extern PyTypeObject pm_SparseEncoderType; /* sparse.c */

/* Checks that o is a loaded Model; NULL with an exception otherwise. */
pm_model *pm_model_check(PyObject *o);
/* pm_model_check, and that this is the process that loaded it (a forked child has none of the
 * model's threads: using them would hang). */
pm_model *pm_model_check_run(PyObject *o);

PyObject *pm_attention(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pm_explain(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pm_check(PyObject *self, PyObject *args, PyObject *kw);
PyObject *pm_backends(PyObject *self, PyObject *args, PyObject *kw);

/* What a CrossEncoder and a SparseEncoder (a second-stage model beside the Model) own besides the
 * model itself: a thread pool, a context, the lock that lets one call run at a time, the path it
 * was loaded from and the process that loaded it. */
typedef struct pm_head {
    modattn_pool *pool;
    modattn_ctx *ctx;
    PyThread_type_lock lock;
    PyObject *path;
    pid_t pid;
} pm_head;
/* Loads the model of dir into *out on ctx (the GIL released). */
typedef int (*pm_head_load_fn)(modattn_ctx *ctx, const char *dir, const modattn_model_options *mo, void *out);
/* __init__(model_name_or_path, device="cpu", threads=None) of such a type: fmt is its
 * PyArg_ParseTupleAndKeywords format ("O|sO:CrossEncoder"), loaded whether __init__ ran already,
 * what its name in errors ("the cross-encoder"). 0, or -1 with an exception. */
int pm_head_init(pm_head *h, PyObject *args, PyObject *kw, const char *fmt, int loaded, const char *what,
                 pm_head_load_fn load, void *out);
/* The head's part of a dealloc (free_model(model) first, where this process loaded it). */
void pm_head_free(pm_head *h, void (*free_model)(void *), void *model);
/* 0 where the model is loaded and this process loaded it; else -1 with an exception naming cls. */
int pm_head_check(const pm_head *h, int loaded, const char *cls);

/* The encoder of a SparseEncoder o and the lock its calls hold (sparse.c); NULL with TypeError when
 * o is not one, or with an exception when it is not usable in this process. */
struct modattn_sparse_encoder *pm_sparse_get(PyObject *o, PyThread_type_lock *lock);

/* A str from bytes that may not be UTF-8 (file names: os.fsdecode's surrogateescape). */
PyObject *pm_fsdecode(const char *s);

#endif
