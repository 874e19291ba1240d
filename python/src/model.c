/* python/src/model.c — modattn.Model: a sentence-transformers model directory loaded by the
 * library; encode() and tokenize().
 *
 * A Model owns a thread pool, an attention context (its policy: `backend`) and the model. Each
 * encode() call takes a session of the context from the model's free list (a new one when every
 * kept session is in use), so that threads encoding with one Model at once each run with their
 * own threads and workspace (modattn_model_embed_with), with the GIL released. What uses the
 * model's own pool (modattn_model_embed: a store's indexing and searching) holds `own`. */
#include "pymodattn.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "pipeline/internal_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pm_model *pm_model_check(PyObject *o) {
    if (!PyObject_TypeCheck(o, &pm_ModelType)) {
        PyErr_Format(PyExc_TypeError, "expected a modattn.Model, not %.100s", Py_TYPE(o)->tp_name);
        return NULL;
    }
    pm_model *m = (pm_model *)o;
    if (!m->model) {
        PyErr_SetString(PyExc_ValueError, "the Model is not loaded (its __init__ failed or was not called)");
        return NULL;
    }
    return m;
}

pm_model *pm_model_check_run(PyObject *o) {
    pm_model *m = pm_model_check(o);
    if (m && m->pid != getpid()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this Model was loaded in the parent of this forked process, whose threads it needs: "
                        "load the model in the child (or use the 'spawn' or 'forkserver' start method)");
        return NULL;
    }
    return m;
}

static void model_release(pm_model *self) {
    if (self->pid && self->pid != getpid()) {
        /* a forked child: the pools' threads are not here, freeing would wait for them */
        self->model = NULL;
        self->ctx = NULL;
        self->pool = NULL;
        self->info = NULL;
        self->sessions.n = 0;
        return;
    }
    pm_sessions_clear(&self->sessions); /* sessions before their context */
    modattn_model_free(self->model);     /* the model before its context and pool */
    modattn_ctx_free(self->ctx);
    modattn__pool_free(self->pool);
    self->model = NULL;
    self->ctx = NULL;
    self->pool = NULL;
    self->info = NULL;
    if (self->own) PyThread_free_lock(self->own);
    self->own = NULL;
}

static void model_dealloc(pm_model *self) {
    model_release(self);
    Py_CLEAR(self->path);
    Py_CLEAR(self->device);
    Py_CLEAR(self->backend);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int model_init(pm_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "device", "threads", "precision", "backend", NULL};
    PyObject *path_obj = NULL, *threads_obj = Py_None;
    const char *device = "auto", *precision = "fp32", *backend = "auto";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|sOss:Model", kwlist, &path_obj, &device, &threads_obj,
                                     &precision, &backend))
        return -1;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "Model.__init__ called twice: make a new Model instead");
        return -1;
    }
    modattn_precision prec = MODATTN_PRECISION_FP32;
    if (modattn_precision_parse(precision, &prec) != 0) {
        pm_invalid("precision '%s' is not available: %s", precision, modattn_last_error());
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
    PyObject *fs = NULL; /* bytes */
    if (!PyUnicode_FSConverter(path_obj, &fs)) return -1;
    PyObject *path_str = PyOS_FSPath(path_obj);
    if (!path_str) {
        Py_DECREF(fs);
        return -1;
    }
    if (PyBytes_Check(path_str)) {
        PyObject *d = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path_str));
        Py_DECREF(path_str);
        path_str = d;
        if (!path_str) {
            Py_DECREF(fs);
            return -1;
        }
    }
    const char *dir = PyBytes_AS_STRING(fs);
    const char *dev = (strcmp(device, "auto") == 0 || strcmp(device, "cpu") == 0 || !*device) ? NULL : device;
    const char *policy = (strcmp(backend, "auto") == 0 || !*backend) ? NULL : backend;
    PyThread_type_lock own = PyThread_allocate_lock();
    if (!own) {
        Py_DECREF(fs);
        Py_DECREF(path_str);
        PyErr_NoMemory();
        return -1;
    }
    modattn_pool *pool = NULL;
    modattn_ctx *ctx = NULL;
    modattn_model *model = NULL;
    pm_error e;
    int st = 0;
    const char *stage = NULL;
    PM_BEGIN_CALL
    if ((st = modattn__pool_create(threads, &pool))) {
        pm_capture(&e, st);
        stage = "creating the thread pool";
    } else {
        modattn_ctx_options co;
        memset(&co, 0, sizeof co);
        co.pool = pool;
        co.policy = policy;
        if ((st = modattn_ctx_create(&co, &ctx))) {
            pm_capture(&e, st);
            stage = NULL; /* the message names the policy */
        } else {
            modattn_model_options mo;
            memset(&mo, 0, sizeof mo);
            mo.device = dev;
            mo.pool = pool;
            mo.precision = prec;
            if ((st = modattn_model_load_ex(ctx, dir, &mo, &model))) {
                pm_capture(&e, st);
                stage = "loading the model";
            }
        }
    }
    if (st) {
        modattn_model_free(model);
        modattn_ctx_free(ctx);
        modattn__pool_free(pool);
    }
    PM_END_CALL
    if (st) {
        PyThread_free_lock(own);
        Py_DECREF(path_str);
        /* the message names the file; say which folder was asked for when it does not */
        char ctxbuf[512];
        if (!stage || strstr(e.msg, dir)) snprintf(ctxbuf, sizeof ctxbuf, "%s", stage ? stage : "");
        else snprintf(ctxbuf, sizeof ctxbuf, "%s '%.400s'", stage, dir);
        Py_DECREF(fs);
        pm_raise(&e, stage ? ctxbuf : NULL);
        return -1;
    }
    Py_DECREF(fs);
    self->pool = pool;
    self->ctx = ctx;
    self->model = model;
    self->info = modattn_model_get_info(model);
    self->threads = threads;
    self->own = own;
    self->pid = getpid();
    self->sessions.threads = threads;
    Py_XSETREF(self->path, path_str);
    Py_XSETREF(self->device, PyUnicode_FromString(device));
    Py_XSETREF(self->backend, PyUnicode_FromString(backend));
    if (!self->device || !self->backend) return -1;
    return 0;
}

/* ------------------------------------------------------------------ texts */

/* The texts of a call, pinned: a tuple holding a reference to every item, and each item's UTF-8
 * bytes (owned by the str or bytes object, valid while the tuple lives). */
typedef struct texts {
    PyObject *items; /* tuple */
    PyObject *keep;  /* list: the bytes behind ptr (pm_text_bytes' references) */
    Py_ssize_t n;
    const char **ptr;
    size_t *len;
    bool single;
} texts;

static void texts_free(texts *t) {
    Py_CLEAR(t->items);
    Py_CLEAR(t->keep);
    PyMem_Free((void *)t->ptr);
    PyMem_Free(t->len);
    t->ptr = NULL;
    t->len = NULL;
}

/* texts: one text (pm_text_bytes: str, bytes, bytearray) or an ordered collection of them (a
 * list, a tuple, any sequence or iterator; not a dict or a set, whose order or items are not
 * the texts). 0, or -1 with an exception naming the index. */
static int texts_get(PyObject *obj, texts *t) {
    memset(t, 0, sizeof *t);
    if (pm_is_text(obj)) {
        t->single = true;
        t->items = PyTuple_Pack(1, obj);
    } else if (PyDict_Check(obj) || PyAnySet_Check(obj) || (PyMapping_Check(obj) && !PySequence_Check(obj))) {
        PyErr_Format(PyExc_TypeError, "texts must be a text (str, bytes) or a list of texts, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    } else {
        t->items = PySequence_Tuple(obj);
        if (!t->items) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "texts must be a text (str, bytes) or a list of texts, not %.100s",
                             Py_TYPE(obj)->tp_name);
            }
            return -1;
        }
    }
    if (!t->items) return -1;
    t->n = PyTuple_GET_SIZE(t->items);
    t->ptr = PyMem_Malloc((size_t)(t->n ? t->n : 1) * sizeof *t->ptr);
    t->len = PyMem_Malloc((size_t)(t->n ? t->n : 1) * sizeof *t->len);
    t->keep = PyList_New(0);
    if (!t->ptr || !t->len || !t->keep) {
        texts_free(t);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < t->n; i++) {
        char what[48];
        if (t->single) snprintf(what, sizeof what, "texts");
        else snprintf(what, sizeof what, "texts[%zd]", i);
        PyObject *b = pm_text_bytes(PyTuple_GET_ITEM(t->items, i), what, &t->ptr[i], &t->len[i]);
        if (!b || PyList_Append(t->keep, b) < 0) {
            Py_XDECREF(b);
            texts_free(t);
            return -1;
        }
        Py_DECREF(b);
    }
    return 0;
}

/* ------------------------------------------------------------------ encode */

/* Indices sorted by length, longest first (ties by index): batches of similar lengths waste
 * the least padding, as sentence-transformers does. The vectors do not depend on it. */
static const size_t *g_sort_len;
static int by_len_desc(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (g_sort_len[i] != g_sort_len[j]) return g_sort_len[i] > g_sort_len[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

static void progress(Py_ssize_t done, Py_ssize_t n, bool end) {
    pm_exc saved;
    pm_exc_take(&saved); /* never lose or cause an exception here */
    PySys_FormatStderr("\rmodattn: encoded %zd/%zd texts%s", done, n, end ? "\n" : "");
    PyObject *err = PySys_GetObject("stderr"); /* borrowed */
    if (err && err != Py_None) {
        PyObject *r = PyObject_CallMethod(err, "flush", NULL);
        Py_XDECREF(r);
    }
    PyErr_Clear();
    pm_exc_give_back(&saved);
}

/* encode, encode_query, encode_document: sentence-transformers' choice of prompt per task */
static PyObject *encode_task(pm_model *self, PyObject *args, PyObject *kw, modattn_embed_task task) {
    static char *kwlist[] = {"texts", "batch_size", "normalize_embeddings", "show_progress_bar",
                             "convert_to_numpy", "sentences", "prompt_name", "prompt", "truncate_dim", NULL};
    PyObject *obj = NULL, *norm_obj = Py_None, *sentences = NULL, *tdim_obj = Py_None;
    Py_ssize_t batch_size = 32;
    int show = 0, to_numpy = 1;
    const char *prompt_name = NULL, *prompt = NULL;
    Py_ssize_t prompt_len = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OnOppOzz#O:encode", kwlist, &obj, &batch_size, &norm_obj, &show,
                                     &to_numpy, &sentences, &prompt_name, &prompt, &prompt_len, &tdim_obj))
        return NULL;
    if (!pm_model_check_run((PyObject *)self)) return NULL; /* before self->info and self->model are read */
    if (prompt && strlen(prompt) != (size_t)prompt_len) {
        pm_invalid("prompt holds U+0000");
        return NULL;
    }
    modattn_embed_options eo = {.prompt = prompt, .prompt_name = prompt && prompt_name ? NULL : prompt_name,
                                .task = task};
    if (tdim_obj != Py_None) {
        Py_ssize_t td = PyNumber_AsSsize_t(tdim_obj, PyExc_OverflowError);
        if (td == -1 && PyErr_Occurred()) return NULL;
        if (!PyLong_Check(tdim_obj) || td < 1 || (size_t)td > self->info->dim) {
            pm_invalid("truncate_dim=%zd: expected an integer from 1 to the model's dimension, %zu", td,
                       self->info->dim);
            return NULL;
        }
        eo.dimensions = (size_t)td;
    }
    {
        const char *t = NULL;
        if (modattn_model_resolve_prompt(self->model, &eo, &t, NULL)) {
            pm_invalid("%s", modattn_last_error());
            return NULL;
        }
    }
    if (obj && sentences) {
        PyErr_SetString(PyExc_TypeError, "encode() got both texts and sentences");
        return NULL;
    }
    if (!obj) obj = sentences;
    if (!obj) {
        PyErr_SetString(PyExc_TypeError, "encode() missing the texts to encode");
        return NULL;
    }
    if (batch_size < 1) {
        pm_invalid("batch_size=%zd: expected at least 1", batch_size);
        return NULL;
    }
    int normalize = 0;
    if (norm_obj != Py_None && (normalize = PyObject_IsTrue(norm_obj)) < 0) return NULL;
    /* the model's own Normalize module already did it: normalising again would change the last
     * bits only, and the vectors would no longer be the ones `modattn embed` gives */
    if (self->info->normalize) normalize = 0;

    texts t;
    if (texts_get(obj, &t) < 0) return NULL;
    const size_t dim = modattn_model_embed_dim(self->model, &eo);
    const Py_ssize_t n = t.n;
    Py_ssize_t shape[2] = {n, (Py_ssize_t)dim};
    PyObject *arr = t.single ? pm_empty_f32(1, shape + 1) : pm_empty_f32(2, shape);
    if (!arr) {
        texts_free(&t);
        return NULL;
    }
    Py_buffer view;
    if (pm_writable_f32(arr, &view) < 0) {
        Py_DECREF(arr);
        texts_free(&t);
        return NULL;
    }
    float *out = view.buf;
    size_t bs = (size_t)batch_size < (size_t)(n ? n : 1) ? (size_t)batch_size : (size_t)(n ? n : 1);
    size_t *order = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *order);
    const char **cptr = PyMem_Malloc(bs * sizeof *cptr);
    size_t *clen = PyMem_Malloc(bs * sizeof *clen);
    float *cout = PyMem_Malloc(bs * dim * sizeof *cout);
    modattn_session *session = NULL;
    PyObject *result = NULL;
    if (!order || !cptr || !clen || !cout) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) order[i] = (size_t)i;
    g_sort_len = t.len; /* (the GIL serialises the sorts) */
    qsort(order, (size_t)n, sizeof *order, by_len_desc);
    g_sort_len = NULL;
    if (n > 0 && pm_sessions_take(&self->sessions, self->ctx, &session) < 0) goto done;
    for (Py_ssize_t first = 0; first < n; first += (Py_ssize_t)bs) {
        size_t cnt = (size_t)(n - first) < bs ? (size_t)(n - first) : bs;
        for (size_t j = 0; j < cnt; j++) {
            cptr[j] = t.ptr[order[first + (Py_ssize_t)j]];
            clen[j] = t.len[order[first + (Py_ssize_t)j]];
        }
        pm_error e;
        int st;
        PM_BEGIN_CALL
        st = modattn_model_embed_opt(self->model, session, &eo, cptr, clen, cnt, cout, NULL);
        if (st) {
            pm_capture(&e, st);
        } else {
            for (size_t j = 0; j < cnt; j++) {
                float *row = out + order[first + (Py_ssize_t)j] * dim;
                memcpy(row, cout + j * dim, dim * sizeof *row);
                if (normalize) modattn__vec_normalize(row, dim);
            }
        }
        PM_END_CALL
        if (st) {
            pm_raise(&e, "encode");
            goto done;
        }
        if (show) progress(first + (Py_ssize_t)cnt, n, first + (Py_ssize_t)cnt == n);
        /* Ctrl-C between chunks: KeyboardInterrupt, everything freed below */
        if (PyErr_CheckSignals() < 0) goto done;
    }
    if (to_numpy || t.single) {
        Py_INCREF(arr);
        result = arr;
    } else {
        result = PyList_New(n);
        for (Py_ssize_t i = 0; result && i < n; i++) {
            PyObject *row = PySequence_GetItem(arr, i);
            if (!row) Py_CLEAR(result);
            else PyList_SET_ITEM(result, i, row);
        }
    }
done:
    if (session) pm_sessions_give(&self->sessions, session);
    PyMem_Free(order);
    PyMem_Free((void *)cptr);
    PyMem_Free(clen);
    PyMem_Free(cout);
    PyBuffer_Release(&view);
    Py_DECREF(arr);
    texts_free(&t);
    return result;
}

static PyObject *model_encode(pm_model *self, PyObject *args, PyObject *kw) {
    return encode_task(self, args, kw, MODATTN_EMBED_PLAIN);
}
static PyObject *model_encode_query(pm_model *self, PyObject *args, PyObject *kw) {
    return encode_task(self, args, kw, MODATTN_EMBED_QUERY);
}
static PyObject *model_encode_document(pm_model *self, PyObject *args, PyObject *kw) {
    return encode_task(self, args, kw, MODATTN_EMBED_DOCUMENT);
}

/* ------------------------------------------------------------------ decode */

/* one list of ids -> str; where names it in errors */
static PyObject *decode_one(pm_model *self, PyObject *seq, bool skip, const char *where) {
    PyObject *fast = PySequence_Fast(seq, "decode: ids must be a list of int or a list of such lists");
    if (!fast) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int32_t *ids = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *ids);
    PyObject *result = NULL;
    if (!ids) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x = PySequence_Fast_GET_ITEM(fast, k);
        if (!PyLong_Check(x) || PyBool_Check(x)) {
            PyErr_Format(PyExc_TypeError, "decode: %s[%zd] must be an int, not %.80s", where, k, Py_TYPE(x)->tp_name);
            goto done;
        }
        long long v = PyLong_AsLongLong(x);
        if (v == -1 && PyErr_Occurred()) PyErr_Clear();
        if (v < INT32_MIN || v > INT32_MAX) v = -1; /* refused below as outside the vocabulary */
        ids[k] = (int32_t)v;
    }
    const modattn_tokenizer *tok = modattn_model_tokenizer(self->model);
    char *text = NULL;
    size_t len = 0;
    int st = modattn_tokenizer_decode(tok, ids, (size_t)n, skip ? 0u : MODATTN_DECODE_KEEP_SPECIALS, &text, &len);
    if (st) {
        pm_error e;
        pm_capture(&e, st);
        pm_raise(&e, where);
        goto done;
    }
    result = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    modattn_free(text);
done:
    PyMem_Free(ids);
    Py_DECREF(fast);
    return result;
}

static PyObject *model_decode(pm_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"ids", "skip_special_tokens", NULL};
    PyObject *obj;
    int skip = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:decode", kwlist, &obj, &skip)) return NULL;
    if (!pm_model_check((PyObject *)self)) return NULL;
    PyObject *fast = PySequence_Fast(obj, "decode: ids must be a list of int or a list of such lists");
    if (!fast) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *result = NULL;
    if (n == 0 || !PySequence_Check(PySequence_Fast_GET_ITEM(fast, 0)) || PyUnicode_Check(PySequence_Fast_GET_ITEM(fast, 0))) {
        result = decode_one(self, fast, skip != 0, "ids");
    } else {
        result = PyList_New(n);
        for (Py_ssize_t i = 0; result && i < n; i++) {
            char where[48];
            snprintf(where, sizeof where, "ids[%zd]", i);
            PyObject *s = decode_one(self, PySequence_Fast_GET_ITEM(fast, i), skip != 0, where);
            if (!s) Py_CLEAR(result);
            else PyList_SET_ITEM(result, i, s);
        }
    }
    Py_DECREF(fast);
    return result;
}

/* ------------------------------------------------------------------ tokenize */

#define TOK_CHUNK 256

static PyObject *model_tokenize(pm_model *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts", NULL};
    PyObject *obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:tokenize", kwlist, &obj)) return NULL;
    if (!pm_model_check((PyObject *)self)) return NULL;
    texts t;
    if (texts_get(obj, &t) < 0) return NULL;
    const size_t maxt = self->info->max_tokens;
    size_t chunk = t.n < TOK_CHUNK ? (size_t)(t.n ? t.n : 1) : TOK_CHUNK;
    int32_t *ids = PyMem_Malloc(chunk * maxt * sizeof *ids);
    size_t *cnt = PyMem_Malloc(chunk * sizeof *cnt);
    PyObject *list = PyList_New(t.n);
    PyObject *result = NULL;
    if (!ids || !cnt || !list) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t first = 0; first < t.n; first += (Py_ssize_t)chunk) {
        size_t c = (size_t)(t.n - first) < chunk ? (size_t)(t.n - first) : chunk;
        pm_error e;
        int st = 0;
        size_t bad = 0;
        PM_BEGIN_CALL
        for (size_t j = 0; j < c && !st; j++) {
            st = modattn_model_tokenize(self->model, t.ptr[first + (Py_ssize_t)j], t.len[first + (Py_ssize_t)j],
                                        ids + j * maxt, maxt, &cnt[j]);
            if (st) {
                pm_capture(&e, st);
                bad = (size_t)first + j;
            }
        }
        PM_END_CALL
        if (st) {
            char where[64];
            snprintf(where, sizeof where, "tokenizing texts[%zu]", bad);
            pm_raise(&e, where);
            goto done;
        }
        for (size_t j = 0; j < c; j++) {
            PyObject *l = PyList_New((Py_ssize_t)cnt[j]);
            if (!l) goto done;
            for (size_t k = 0; k < cnt[j]; k++) {
                PyObject *v = PyLong_FromLong(ids[j * maxt + k]);
                if (!v) {
                    Py_DECREF(l);
                    goto done;
                }
                PyList_SET_ITEM(l, (Py_ssize_t)k, v);
            }
            PyList_SET_ITEM(list, first + (Py_ssize_t)j, l);
        }
        if (PyErr_CheckSignals() < 0) goto done;
    }
    if (t.single) {
        result = PyList_GET_ITEM(list, 0);
        Py_INCREF(result);
    } else {
        result = list;
        list = NULL;
    }
done:
    Py_XDECREF(list);
    PyMem_Free(ids);
    PyMem_Free(cnt);
    texts_free(&t);
    return result;
}

/* ------------------------------------------------------------------ attributes */

#define MODEL_GET(name) \
    static PyObject *get_##name(pm_model *self, void *c) { \
        (void)c; \
        if (!pm_model_check((PyObject *)self)) return NULL;

MODEL_GET(dim) return PyLong_FromSize_t(self->info->dim); }
MODEL_GET(max_seq_length) return PyLong_FromSize_t(self->info->max_tokens); }
MODEL_GET(name) return PyUnicode_DecodeFSDefault(self->info->name ? self->info->name : ""); }
MODEL_GET(normalize) return PyBool_FromLong(self->info->normalize); }
MODEL_GET(model_type) return PyUnicode_FromString(self->info->model_type ? self->info->model_type : ""); }
MODEL_GET(hidden_size) return PyLong_FromLong(self->info->hidden); }
MODEL_GET(num_layers) return PyLong_FromLong(self->info->layers); }
MODEL_GET(num_heads) return PyLong_FromLong(self->info->heads); }
MODEL_GET(vocab_size) return PyLong_FromLong(self->info->vocab); }
MODEL_GET(lower_case) return PyBool_FromLong(self->info->lower_case); }
MODEL_GET(identity) return PyUnicode_FromString(self->info->identity); }
MODEL_GET(weights_hash) return PyUnicode_FromString(self->info->weights_hash); }
MODEL_GET(pooling)
    char buf[96];
    modattn_pooling_format(self->info->pooling, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}
MODEL_GET(device_name)
    char buf[64];
    modattn_device_format(self->info->device, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}
MODEL_GET(precision) return PyUnicode_FromString(modattn_precision_name(self->info->precision)); }
MODEL_GET(threads) return PyLong_FromLong(modattn__pool_threads(self->pool)); }
MODEL_GET(backend) Py_INCREF(self->backend); return self->backend; }
MODEL_GET(path) Py_INCREF(self->path); return self->path; }

static PyObject *model_repr(pm_model *self) {
    if (!self->model) return PyUnicode_FromString("<modattn.Model (not loaded)>");
    char pool[96], dev[64];
    modattn_pooling_format(self->info->pooling, pool, sizeof pool);
    modattn_device_format(self->info->device, dev, sizeof dev);
    return PyUnicode_FromFormat("<modattn.Model %R: dim=%zu, max_seq_length=%zu, pooling=%s%s, device=%s>",
                                self->path, self->info->dim, self->info->max_tokens, pool,
                                self->info->normalize ? "+normalize" : "", dev);
}

static PyGetSetDef model_getset[] = {
    {"dim", (getter)get_dim, NULL, "Embedding size.", NULL},
    {"max_seq_length", (getter)get_max_seq_length, NULL,
     "Word pieces per text after truncation, [CLS]/[SEP] included.", NULL},
    {"name", (getter)get_name, NULL, "The model folder's name.", NULL},
    {"normalize", (getter)get_normalize, NULL, "Whether the model L2-normalises its output.", NULL},
    {"model_type", (getter)get_model_type, NULL, "config.json's model_type.", NULL},
    {"hidden_size", (getter)get_hidden_size, NULL, "config.json's hidden_size.", NULL},
    {"num_layers", (getter)get_num_layers, NULL, "config.json's num_hidden_layers.", NULL},
    {"num_heads", (getter)get_num_heads, NULL, "config.json's num_attention_heads.", NULL},
    {"vocab_size", (getter)get_vocab_size, NULL, "config.json's vocab_size.", NULL},
    {"lower_case", (getter)get_lower_case, NULL, "sentence_bert_config's do_lower_case.", NULL},
    {"identity", (getter)get_identity, NULL, "The model's identity (what a store checks).", NULL},
    {"weights_hash", (getter)get_weights_hash, NULL, "XXH3-64 of model.safetensors, 16 hex digits.", NULL},
    {"pooling", (getter)get_pooling, NULL, "Pooling modes ('mean', 'cls', 'mean+max', ...).", NULL},
    {"device_name", (getter)get_device_name, NULL, "Where the model runs ('cpu', 'opencl:0').", NULL},
    {"precision", (getter)get_precision, NULL, "The dense layers' arithmetic: 'fp32', 'bf16x3', 'bf16' or 'int8'.", NULL},
    {"threads", (getter)get_threads, NULL, "Threads of each encode call.", NULL},
    {"backend", (getter)get_backend, NULL, "The attention policy as given.", NULL},
    {"path", (getter)get_path, NULL, "The model folder as given.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef model_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))model_encode, METH_VARARGS | METH_KEYWORDS,
     "encode($self, texts, batch_size=32, normalize_embeddings=None, show_progress_bar=False, convert_to_numpy=True,\n"
     "       prompt_name=None, prompt=None, truncate_dim=None)\n"
     "--\n\n"
     "Embeddings of texts (a str, or a list of str) as a float32 numpy array: (dim,) for one str,\n"
     "(len(texts), dim) for a list. The vectors equal `modattn embed`'s bit for bit and do not\n"
     "depend on the other texts or batch_size. batch_size texts go to the library at a time;\n"
     "Ctrl-C is seen between them. normalize_embeddings=True L2-normalises (a model with a\n"
     "Normalize module already does; None and False leave the model's output as it is).\n"
     "bytes items are taken as UTF-8 (invalid sequences become U+FFFD). The GIL is released\n"
     "while the model runs: threads may encode with one Model at once.\n"
     "prompt_name=NAME puts the model's prompt NAME (config_sentence_transformers.json) before\n"
     "each text, prompt=TEXT that text; neither: its default_prompt_name's, as sentence-\n"
     "transformers' encode. truncate_dim=N keeps the first N dimensions (Matryoshka; default: the\n"
     "model's truncate_dim), L2-normalised again when the model normalises."},
    {"encode_query", (PyCFunction)(void (*)(void))model_encode_query, METH_VARARGS | METH_KEYWORDS,
     "encode_query($self, texts, batch_size=32, normalize_embeddings=None, show_progress_bar=False, "
     "convert_to_numpy=True, prompt_name=None, prompt=None, truncate_dim=None)\n--\n\n"
     "encode with the model's \"query\" prompt unless one is given (sentence-transformers' encode_query)."},
    {"encode_document", (PyCFunction)(void (*)(void))model_encode_document, METH_VARARGS | METH_KEYWORDS,
     "encode_document($self, texts, batch_size=32, normalize_embeddings=None, show_progress_bar=False, "
     "convert_to_numpy=True, prompt_name=None, prompt=None, truncate_dim=None)\n--\n\n"
     "encode with the model's first prompt of \"document\", \"passage\", \"corpus\" unless one is given\n"
     "(sentence-transformers' encode_document; \"document\" is always there, empty unless set)."},
    {"decode", (PyCFunction)(void (*)(void))model_decode, METH_VARARGS | METH_KEYWORDS,
     "decode($self, ids, skip_special_tokens=True)\n--\n\n"
     "Token ids back to text with the tokenizer.json's decoder (ByteLevel, WordPiece or none), as\n"
     "`tokenizers`' Tokenizer.decode: a str for a list of int, a list of str for a list of such lists."},
    {"tokenize", (PyCFunction)(void (*)(void))model_tokenize, METH_VARARGS | METH_KEYWORDS,
     "tokenize($self, texts)\n--\n\n"
     "Token ids as encode feeds them to the model ([CLS] ... [SEP], truncated to max_seq_length):\n"
     "a list of int for one str, a list of such lists for a list of str."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pm_ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "modattn.Model",
    .tp_basicsize = sizeof(pm_model),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_repr = (reprfunc)model_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Model(path, device='auto', threads=None, precision='fp32', backend='auto')\n--\n\n"
              "A BERT-family sentence-transformers model directory, loaded by modattn.\n"
              "device: 'auto' or 'cpu' (the CPU), or a modattn device name ('opencl', 'opencl:0').\n"
              "threads: threads per encode call (None: one per CPU).\n"
              "precision: 'fp32' (exact), 'bf16x3' (fp32 GEMMs as three bfloat16 products, within\n"
              "1e-9 of fp32's cosine, where the CPU has AMX-BF16), 'bf16' (bfloat16 GEMMs summed in fp32, where the CPU has\n"
              "AVX512_BF16) or 'int8' (int8 GEMMs with per-channel weight and per-row input scales,\n"
              "where it has AVX512_VNNI); refused with the reason where the CPU lacks them.\n"
              "backend: the attention policy ('auto', an implementation's name, or 'a,b').",
    .tp_methods = model_methods,
    .tp_getset = model_getset,
    .tp_init = (initproc)model_init,
    .tp_new = PyType_GenericNew,
};
