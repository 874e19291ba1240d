/* python/src/store.c — modattn.Store: a document store (modattn/store.h) bound to one Model;
 * index() walks files into it (modattn_index_paths), search() ranks its chunks
 * (modattn_searcher: the vectors and ANN index held between searches).
 *
 * A store is used by one thread at a time (its lock); indexing and searching embed with the
 * model's own pool (modattn_model_embed), so they also hold the model's `own` lock. Both are
 * taken with the GIL released, store first. Nothing here changes process-wide state: SQLite's
 * allocator is left as it is (Python's own sqlite3 module shares libsqlite3). */
#include "pymodattn.h"
#include "core/internal_core.h"
#include "modattn/sparse.h"
#include "pipeline/internal_search.h"
#include "pipeline/pipeline_internal.h"

#include <math.h>
#include <string.h>

typedef struct pm_store {
    PyObject_HEAD
    modattn_store *store;
    /* the vectors and ANN index held between searches, opened again when the store changes
     * (modattn_searcher: a Store searched many times reads them once) */
    modattn_searcher *searcher;
    pm_model *model; /* strong reference */
    PyThread_type_lock lock;
    PyObject *path;  /* str, as given */
    bool readonly;
} pm_store;

/* A forked child must not close the parent's SQLite connection (SQLite: never carry a connection
 * across fork): it is left open, unused. */
static bool foreign(const pm_store *self) { return self->model && self->model->pid != getpid(); }

static void store_dealloc(pm_store *self) {
    if (!foreign(self)) { /* no other reference: nobody is using it */
        modattn_searcher_free(self->searcher);
        modattn_store_close(self->store);
    }
    self->searcher = NULL;
    self->store = NULL;
    if (self->lock) PyThread_free_lock(self->lock);
    Py_CLEAR(self->model);
    Py_CLEAR(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int store_ready(pm_store *self) {
    if (!self->lock || !self->model) {
        PyErr_SetString(PyExc_ValueError, "the Store is not open (its __init__ failed or was not called)");
        return -1;
    }
    if (!pm_model_check_run((PyObject *)self->model)) return -1;
    if (!self->store) {
        PyErr_SetString(PyExc_ValueError, "the Store is closed");
        return -1;
    }
    return 0;
}

/* Raises: ModelMismatchError for a store of another model, as the library says. */
static int check_model(modattn_store *st, const modattn_model *m, pm_error *e) {
    /* as a search checks it: the store's dimensions, the model's query prompt */
    modattn_embed_options eo;
    modattn_store_model sm;
    int r = modattn_store_embed_options(st, m, NULL, true, &eo, &sm);
    if (!r) r = modattn_store_check_model(st, &sm);
    if (r == MODATTN_ENOTFOUND) return 0; /* nothing indexed yet: the first index() binds it */
    if (r) pm_capture(e, r);
    return r;
}

static int store_init(pm_store *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "model", "readonly", NULL};
    PyObject *path_obj, *model_obj;
    int readonly = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|p:Store", kwlist, &path_obj, &model_obj, &readonly)) return -1;
    if (self->lock) {
        PyErr_SetString(PyExc_RuntimeError, "Store.__init__ called twice: make a new Store instead");
        return -1;
    }
    pm_model *model = pm_model_check_run(model_obj);
    if (!model) return -1;
    PyObject *fs = NULL;
    if (!PyUnicode_FSConverter(path_obj, &fs)) return -1;
    PyObject *path_str = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(fs));
    PyThread_type_lock lock = PyThread_allocate_lock();
    if (!path_str || !lock) {
        Py_DECREF(fs);
        Py_XDECREF(path_str);
        if (lock) PyThread_free_lock(lock);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    const char *path = PyBytes_AS_STRING(fs);
    modattn_store *st = NULL;
    pm_error e;
    int r;
    const char *stage = "opening the store";
    PM_BEGIN_CALL
    r = modattn_store_open(path, readonly ? MODATTN_STORE_READONLY : MODATTN_STORE_CREATE, &st);
    if (r) {
        pm_capture(&e, r);
    } else if ((r = check_model(st, model->model, &e))) {
        stage = "the store belongs to another model";
        modattn_store_close(st);
        st = NULL;
    }
    PM_END_CALL
    if (r) {
        char ctxbuf[600];
        if (strstr(e.msg, path)) snprintf(ctxbuf, sizeof ctxbuf, "%s", stage);
        else snprintf(ctxbuf, sizeof ctxbuf, "%s '%.400s'", stage, path);
        Py_DECREF(fs);
        Py_DECREF(path_str);
        PyThread_free_lock(lock);
        pm_raise(&e, ctxbuf);
        return -1;
    }
    Py_DECREF(fs);
    self->store = st;
    self->lock = lock;
    self->readonly = readonly != 0;
    Py_INCREF(model);
    self->model = model;
    self->path = path_str;
    return 0;
}

/* ------------------------------------------------------------------ index */

typedef struct index_ud {
    PyObject *errors, *skipped, *pruned; /* lists of (path, message) */
    bool progress, shown, failed;
    bool interrupted; /* index_cancel stopped the run (Ctrl-C) ... */
    bool retrip;      /* ... having taken Python's SIGINT flag, to be set again */
} index_ud;

/* opt.cancel: asked between documents, between batches and while a file's text is extracted, on
 * the indexing thread (the GIL released, asynchronous signals blocked: PM_BEGIN_CALL). Ctrl-C
 * shows either as a SIGINT still pending (no thread that could take it: it is delivered, and
 * Python's handler runs, when the call returns) or as Python's flag, set by its C handler on
 * another thread that took the signal (taken here, set again when the call returns). Either way
 * the run stops within the time of one batch, and PyErr_CheckSignals raises after it. */
static int index_cancel(void *ud) {
    index_ud *u = ud;
    if (u->interrupted) return 1;
    sigset_t p;
    if (sigpending(&p) == 0 && sigismember(&p, SIGINT) == 1) {
        u->interrupted = true;
        return 1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    if (PyOS_InterruptOccurred()) { /* 0 on any thread but the main one */
        u->interrupted = true;
        u->retrip = true;
    }
    PyGILState_Release(g);
    return u->interrupted;
}

static PyObject *pair(const char *path, const char *msg) {
    PyObject *p = pm_fsdecode(path);
    PyObject *m = PyUnicode_DecodeUTF8(msg ? msg : "", (Py_ssize_t)strlen(msg ? msg : ""), "replace");
    PyObject *t = (p && m) ? PyTuple_Pack(2, p, m) : NULL;
    Py_XDECREF(p);
    Py_XDECREF(m);
    return t;
}

/* Called on the indexing thread (the GIL released): takes the GIL for the lists. */
static void on_event(void *ud, modattn_index_event ev, const char *path, const char *msg) {
    index_ud *u = ud;
    PyObject *list = ev == MODATTN_INDEX_ERROR ? u->errors : ev == MODATTN_INDEX_SKIPPED ? u->skipped
                   : ev == MODATTN_INDEX_PRUNED ? u->pruned : NULL;
    if (!list) return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *t = pair(path, msg);
    if (!t || PyList_Append(list, t) < 0) {
        u->failed = true;
        PyErr_Clear();
    }
    Py_XDECREF(t);
    PyGILState_Release(g);
}

static void on_progress(void *ud, const modattn_index_progress *p) {
    index_ud *u = ud;
    if (!u->progress) return;
    PyGILState_STATE g = PyGILState_Ensure();
    pm_exc saved;
    pm_exc_take(&saved);
    PySys_WriteStderr("\rmodattn: indexing: %llu/%llu files  %llu chunks", (unsigned long long)p->files_done,
                      (unsigned long long)p->files_total, (unsigned long long)p->chunks);
    PyObject *err = PySys_GetObject("stderr");
    if (err && err != Py_None) {
        PyObject *r = PyObject_CallMethod(err, "flush", NULL);
        Py_XDECREF(r);
    }
    PyErr_Clear();
    pm_exc_give_back(&saved);
    u->shown = true;
    PyGILState_Release(g);
}

/* paths: one str / PathLike, or a sequence of them -> a tuple of bytes (os.fsencode). */
static PyObject *paths_get(PyObject *obj) {
    PyObject *seq;
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyObject_HasAttrString(obj, "__fspath__"))
        seq = PyTuple_Pack(1, obj);
    else
        seq = PySequence_Tuple(obj);
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "paths must be a path or a list of paths, not %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(seq, i), &b)) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, b);
    }
    Py_DECREF(seq);
    return out;
}

static int set_u64(PyObject *d, const char *k, uint64_t v) {
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (!o) return -1;
    int r = PyDict_SetItemString(d, k, o);
    Py_DECREF(o);
    return r;
}

static int set_obj(PyObject *d, const char *k, PyObject *o) {
    if (!o) return -1;
    int r = PyDict_SetItemString(d, k, o);
    Py_DECREF(o);
    return r;
}

static int set_obj_attr(PyObject *o, const char *k, PyObject *v) {
    if (!v) return -1;
    int r = PyObject_SetAttrString(o, k, v);
    Py_DECREF(v);
    return r;
}

static PyObject *store_index(pm_store *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"paths", "progress", "prune", "chunk_tokens", "overlap", "max_file_size",
                             "file_timeout", "sparse", NULL};
    PyObject *paths_obj, *sparse_obj = Py_None;
    int progress = 1, prune = 0;
    Py_ssize_t chunk_tokens = 0, overlap = -1;
    unsigned long long max_file = 0;
    double file_timeout = MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p$pnnKdO:index", kwlist, &paths_obj, &progress, &prune,
                                     &chunk_tokens, &overlap, &max_file, &file_timeout, &sparse_obj))
        return NULL;
    /* sparse: the SparseEncoder whose vectors the store keeps (`index --sparse DIR`; a directory is
     * loaded by modattn.Store.index, python/modattn/__init__.py) */
    PyThread_type_lock sparse_lock = NULL;
    modattn_sparse_encoder *sparse = NULL;
    if (sparse_obj != Py_None && !(sparse = pm_sparse_get(sparse_obj, &sparse_lock))) return NULL;
    if (!(file_timeout >= 0) || file_timeout > 1e6) {
        pm_invalid("file_timeout=%g: expected seconds in [0, 1e6] (0: no limit)", file_timeout);
        return NULL;
    }
    if (store_ready(self) < 0) return NULL;
    if (chunk_tokens < 0) {
        pm_invalid("chunk_tokens=%zd: expected 0 (the model's max_seq_length) or more",
                     chunk_tokens);
        return NULL;
    }
    PyObject *paths = paths_get(paths_obj);
    if (!paths) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(paths);
    const char **pv = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *pv);
    index_ud u;
    memset(&u, 0, sizeof u);
    u.errors = PyList_New(0);
    u.skipped = PyList_New(0);
    u.pruned = PyList_New(0);
    u.progress = progress != 0;
    PyObject *result = NULL;
    if (!pv || !u.errors || !u.skipped || !u.pruned) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) pv[i] = PyBytes_AS_STRING(PyTuple_GET_ITEM(paths, i));
    modattn_index_options o;
    memset(&o, 0, sizeof o);
    o.chunk_tokens = (size_t)chunk_tokens;
    o.overlap = (long)overlap;
    o.max_file_bytes = (uint64_t)max_file;
    o.prune = prune != 0;
    o.on_event = on_event;
    o.on_progress = on_progress;
    o.cancel = index_cancel;
    o.file_timeout_s = file_timeout > 0 ? file_timeout : -1;
    o.ud = &u;
    o.sparse = sparse;
    modattn_index_stats s;
    memset(&s, 0, sizeof s);
    pm_error e;
    int st;
    double secs = 0;
    PM_BEGIN_CALL
    pm_lock(self->lock);
    pm_lock(self->model->own);
    if (sparse_lock) pm_lock(sparse_lock);
    if (!self->store) {
        st = pm_capture_msg(&e, MODATTN_EINVAL, "the Store is closed");
    } else {
        uint64_t t0 = modattn__now_ns();
        st = modattn_index_paths(self->store, self->model->model, pv, (size_t)n, &o, &s);
        secs = (double)(modattn__now_ns() - t0) * 1e-9;
        if (st) pm_capture(&e, st);
    }
    if (sparse_lock) pm_unlock(sparse_lock);
    pm_unlock(self->model->own);
    pm_unlock(self->lock);
    PM_END_CALL
    if (u.shown) PySys_WriteStderr("\n");
    if (st) {
        pm_raise(&e, "index");
        goto done;
    }
    if (u.interrupted && u.retrip) PyErr_SetInterrupt(); /* the flag taken by index_cancel */
    if (u.failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *d = PyDict_New();
    if (!d) goto done;
    const char *vf = s.vector_file_error[0] ? "not written" : !s.vector_file_written ? "current"
                   : s.vector_file_appended ? "appended" : "written";
    if (set_u64(d, "files_seen", s.files_seen) < 0 || set_u64(d, "files_indexed", s.files_indexed) < 0 ||
        set_u64(d, "files_unchanged", s.files_unchanged) < 0 || set_u64(d, "files_skipped", s.files_skipped) < 0 ||
        set_u64(d, "files_pruned", s.files_pruned) < 0 || set_u64(d, "files_failed", s.errors) < 0 ||
        set_u64(d, "chunks", s.chunks_embedded) < 0 || set_u64(d, "tokens", s.tokens_embedded) < 0 ||
        set_u64(d, "bytes_read", s.bytes_read) < 0 || set_obj(d, "seconds", PyFloat_FromDouble(secs)) < 0 ||
        set_obj(d, "vector_file", PyUnicode_FromString(vf)) < 0 ||
        set_obj(d, "vector_file_note",
                PyUnicode_DecodeUTF8(s.vector_file_error[0] ? s.vector_file_error : s.vector_file_reason,
                                     (Py_ssize_t)strlen(s.vector_file_error[0] ? s.vector_file_error
                                                                               : s.vector_file_reason),
                                     "replace")) < 0 ||
        PyDict_SetItemString(d, "errors", u.errors) < 0 || PyDict_SetItemString(d, "skipped", u.skipped) < 0 ||
        PyDict_SetItemString(d, "pruned", u.pruned) < 0 ||
        PyDict_SetItemString(d, "interrupted", s.cancelled ? Py_True : Py_False) < 0) {
        Py_DECREF(d);
        goto done;
    }
    if (s.cancelled && PyErr_CheckSignals() < 0) {
        /* Ctrl-C: what was committed stays, and the exception says how much (its result attribute:
         * this dict) */
        if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
            PyObject *old = pm_exc_value();
            PyObject *msg = PyUnicode_FromFormat("Store.index interrupted: %llu documents committed (%llu chunks); "
                                                 "the rest is not indexed (run it again to go on)",
                                                 (unsigned long long)s.files_indexed,
                                                 (unsigned long long)s.chunks_embedded);
            PyObject *nv = msg ? PyObject_CallOneArg(PyExc_KeyboardInterrupt, msg) : NULL;
            Py_XDECREF(msg);
            if (!nv) { /* keep the one raised */
                PyErr_Clear();
                nv = old;
                old = NULL;
            }
            if (nv && (PyObject_SetAttrString(nv, "result", d) < 0 ||
                       set_obj_attr(nv, "files_indexed", PyLong_FromUnsignedLongLong(s.files_indexed)) < 0))
                PyErr_Clear();
            if (nv) PyErr_SetObject(PyExc_KeyboardInterrupt, nv);
            else PyErr_SetNone(PyExc_KeyboardInterrupt);
            Py_XDECREF(nv);
            Py_XDECREF(old);
        }
        Py_DECREF(d);
        goto done;
    }
    result = d;
done:
    Py_XDECREF(u.errors);
    Py_XDECREF(u.skipped);
    Py_XDECREF(u.pruned);
    PyMem_Free((void *)pv);
    Py_DECREF(paths);
    return result;
}

/* ------------------------------------------------------------------ search */

static PyObject *hit_dict(const modattn_search_result *r) {
    const modattn_store_chunk *c = &r->chunk;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    PyObject *hl = PyList_New((Py_ssize_t)r->nspans);
    for (size_t h = 0; hl && h < r->nspans; h++) {
        PyObject *t = Py_BuildValue("(nn)", (Py_ssize_t)r->spans[h].start, (Py_ssize_t)r->spans[h].end);
        if (!t) Py_CLEAR(hl);
        else PyList_SET_ITEM(hl, (Py_ssize_t)h, t);
    }
    const char *text = c->text ? c->text : "";
    if (set_obj(d, "rank", PyLong_FromLong(r->rank)) < 0 || set_obj(d, "score", PyFloat_FromDouble(r->score)) < 0 ||
        set_obj(d, "path", pm_fsdecode(c->path)) < 0 || set_obj(d, "start", PyLong_FromLongLong(c->start)) < 0 ||
        set_obj(d, "end", PyLong_FromLongLong(c->end)) < 0 ||
        /* start_byte/end_byte: the older names of start/end, kept for code that reads them */
        set_obj(d, "start_byte", PyLong_FromLongLong(c->start)) < 0 ||
        set_obj(d, "end_byte", PyLong_FromLongLong(c->end)) < 0 || set_obj(d, "line", PyLong_FromLongLong(c->line)) < 0 ||
        set_obj(d, "page", PyLong_FromLongLong(c->page)) < 0 ||
        set_obj(d, "kind", PyUnicode_FromString(c->kind ? c->kind : "")) < 0 ||
        set_obj(d, "text", PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace")) < 0 ||
        set_obj(d, "chunk_id", PyLong_FromLongLong(c->id)) < 0 ||
        set_obj(d, "vector_rank", r->vector_rank ? PyLong_FromLong(r->vector_rank) : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(d, "keyword_rank", r->keyword_rank ? PyLong_FromLong(r->keyword_rank) : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(d, "cosine", isfinite(r->cosine) ? PyFloat_FromDouble(r->cosine) : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(d, "bm25", isfinite(r->bm25) ? PyFloat_FromDouble(r->bm25) : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(d, "highlights", hl) < 0 ||
        /* the snippet's byte range of text (pipeline/snippet.c), as the CLI's and the server's */
        set_obj(d, "snippet", Py_BuildValue("(nn)", (Py_ssize_t)r->snippet_start, (Py_ssize_t)r->snippet_end)) < 0 ||
        /* which rankings brought it, as the CLI's and the server's "found_by" (docs/FIELDS.md) */
        set_obj(d, "sparse_rank", r->sparse_rank ? PyLong_FromLong(r->sparse_rank) : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(d, "sparse_score", r->sparse_rank ? PyFloat_FromDouble(r->sparse_score) : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(d, "found_by", PyUnicode_FromString(modattn__search_found_by(r))) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *store_search(pm_store *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"query", "k", "mode", "path_prefix", "sparse", "sparse_weight", NULL};
    PyObject *query_obj;
    Py_ssize_t k = MODATTN_SEARCH_DEFAULT_K; /* as `modattn search` and the server's "k" */
    const char *mode = "hybrid";
    PyObject *prefix_obj = Py_None, *sparse_obj = Py_None;
    double sparse_weight = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|nsOOd:search", kwlist, &query_obj, &k, &mode, &prefix_obj,
                                     &sparse_obj, &sparse_weight))
        return NULL;
    PyThread_type_lock sparse_lock = NULL;
    modattn_sparse_encoder *sparse = NULL;
    if (sparse_obj != Py_None && !(sparse = pm_sparse_get(sparse_obj, &sparse_lock))) return NULL;
    if (!(sparse_weight >= 0 && sparse_weight <= 1e6)) {
        pm_invalid("sparse_weight=%g: expected 0 (the default) to 1e6", sparse_weight);
        return NULL;
    }
    if (store_ready(self) < 0) return NULL;
    modattn_search_params p;
    memset(&p, 0, sizeof p);
    if (strcmp(mode, "hybrid") == 0) p.mode = MODATTN_SEARCH_HYBRID;
    else if (strcmp(mode, "vector") == 0) p.mode = MODATTN_SEARCH_VECTOR;
    else if (strcmp(mode, "keyword") == 0) p.mode = MODATTN_SEARCH_KEYWORD;
    else if (strcmp(mode, "sparse") == 0) p.mode = MODATTN_SEARCH_SPARSE;
    else {
        pm_invalid("mode='%s': expected 'hybrid', 'vector', 'keyword' or 'sparse'", mode);
        return NULL;
    }
    if (p.mode == MODATTN_SEARCH_SPARSE && !sparse) {
        pm_invalid("mode='sparse' needs sparse=modattn.SparseEncoder(DIR) with the store's SPLADE model "
                   "(the one `modattn index --sparse DIR` used)");
        return NULL;
    }
    p.sparse = sparse; /* hybrid: fused in when the store has sparse vectors */
    p.sparse_weight = sparse_weight;
    if (k < 1 || k > 10000) {
        pm_invalid("k=%zd: expected 1 to 10000", k);
        return NULL;
    }
    p.k = (size_t)k;
    /* a text as Model.encode takes one (str, bytes, bytearray: pm_text_bytes) */
    size_t qlen = 0;
    const char *query = NULL;
    PyObject *qkeep = pm_text_bytes(query_obj, "query", &query, &qlen);
    if (!qkeep) return NULL;
    if (memchr(query, '\0', qlen)) {
        Py_DECREF(qkeep);
        pm_invalid("the query holds a NUL character");
        return NULL;
    }
    PyObject *prefix_b = NULL;
    if (prefix_obj != Py_None) {
        if (!PyUnicode_FSConverter(prefix_obj, &prefix_b)) {
            Py_DECREF(qkeep);
            return NULL;
        }
        p.path_prefix = PyBytes_AS_STRING(prefix_b);
    }
    modattn_search_result *res = NULL;
    size_t n = 0;
    pm_error e;
    int st;
    bool empty = false;
    PM_BEGIN_CALL
    pm_lock(self->lock);
    pm_lock(self->model->own);
    if (sparse_lock) pm_lock(sparse_lock);
    if (!self->store) {
        st = pm_capture_msg(&e, MODATTN_EINVAL, "the Store is closed");
    } else {
        modattn_embed_options eo;
        modattn_store_model sm;
        st = modattn_store_embed_options(self->store, self->model->model, NULL, true, &eo, &sm);
        if (!st) st = modattn_store_check_model(self->store, &sm);
        if (st == MODATTN_ENOTFOUND) { /* nothing indexed: no results */
            empty = true;
            st = 0;
        } else if (st) {
            pm_capture(&e, st);
        } else {
            const char *qs[1] = {query};
            st = self->searcher ? 0 : modattn_searcher_create(self->store, self->model->model, &self->searcher);
            if (!st)
                st = modattn_searcher_search(self->searcher, qs, 1, &p, modattn_ctx_exec(self->model->ctx), &res, &n,
                                             NULL, NULL);
            if (st) pm_capture(&e, st);
        }
    }
    if (sparse_lock) pm_unlock(sparse_lock);
    pm_unlock(self->model->own);
    pm_unlock(self->lock);
    PM_END_CALL
    Py_XDECREF(prefix_b);
    Py_DECREF(qkeep);
    if (st) return pm_raise(&e, "search");
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && !empty && i < n; i++) {
        PyObject *d = hit_dict(&res[i]);
        if (!d || PyList_Append(list, d) < 0) Py_CLEAR(list);
        Py_XDECREF(d);
    }
    modattn_search_results_free(res, n);
    return list;
}

/* ------------------------------------------------------------------ the rest */

static PyObject *store_counts(pm_store *self, PyObject *unused) {
    (void)unused;
    if (store_ready(self) < 0) return NULL;
    modattn_store_counts c;
    int64_t srows = 0, schunks = 0;
    pm_error e;
    int st;
    PM_BEGIN_CALL
    pm_lock(self->lock);
    st = self->store ? modattn_store_get_counts(self->store, &c) : pm_capture_msg(&e, MODATTN_EINVAL, "the Store is closed");
    if (!st && self->store) st = modattn__store_sparse_count(self->store, &srows, &schunks);
    if (st && self->store) pm_capture(&e, st);
    pm_unlock(self->lock);
    PM_END_CALL
    if (st) return pm_raise(&e, "counts");
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L}", "documents", (long long)c.documents, "chunks", (long long)c.chunks,
                         "embeddings", (long long)c.embeddings, "sparse_rows", (long long)srows, "sparse_chunks",
                         (long long)schunks);
}

/* The SPLADE model the store's sparse vectors were made with (meta), or None. */
static PyObject *store_sparse_model(pm_store *self, PyObject *unused) {
    (void)unused;
    if (store_ready(self) < 0) return NULL;
    modattn__sparse_ident *id = PyMem_Calloc(1, sizeof *id);
    if (!id) return PyErr_NoMemory();
    bool found = false;
    pm_error e;
    int st;
    PM_BEGIN_CALL
    pm_lock(self->lock);
    st = self->store ? modattn__store_sparse_get(self->store, id, &found)
                     : pm_capture_msg(&e, MODATTN_EINVAL, "the Store is closed");
    if (st && self->store) pm_capture(&e, st);
    pm_unlock(self->lock);
    PM_END_CALL
    PyObject *r = NULL;
    if (st) {
        pm_raise(&e, "sparse_model");
    } else if (!found) {
        r = Py_None;
        Py_INCREF(r);
    } else {
        PyObject *name = PyUnicode_DecodeUTF8(id->name, (Py_ssize_t)strlen(id->name), "replace");
        PyObject *dir = id->dir[0] ? pm_fsdecode(id->dir) : (Py_INCREF(Py_None), Py_None);
        r = (name && dir) ? Py_BuildValue("{s:O,s:O,s:s,s:n,s:d}", "name", name, "dir", dir, "identity", id->identity,
                                          "top_k", (Py_ssize_t)id->top_k, "threshold", (double)id->threshold)
                          : NULL;
        Py_XDECREF(name);
        Py_XDECREF(dir);
    }
    PyMem_Free(id);
    return r;
}

static PyObject *store_close(pm_store *self, PyObject *unused) {
    (void)unused;
    if (!self->lock) Py_RETURN_NONE;
    if (foreign(self)) {
        self->store = NULL;
        self->searcher = NULL;
        Py_RETURN_NONE;
    }
    PM_BEGIN_CALL
    pm_lock(self->lock); /* waits for an index() or search() of another thread */
    modattn_searcher_free(self->searcher);
    self->searcher = NULL;
    modattn_store_close(self->store);
    self->store = NULL;
    pm_unlock(self->lock);
    PM_END_CALL
    Py_RETURN_NONE;
}

static PyObject *store_enter(pm_store *self, PyObject *unused) {
    (void)unused;
    if (store_ready(self) < 0) return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *store_exit(pm_store *self, PyObject *args) {
    (void)args;
    PyObject *r = store_close(self, NULL);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *get_path(pm_store *self, void *c) {
    (void)c;
    if (!self->path) Py_RETURN_NONE;
    Py_INCREF(self->path);
    return self->path;
}

static PyObject *get_model(pm_store *self, void *c) {
    (void)c;
    if (!self->model) Py_RETURN_NONE;
    Py_INCREF(self->model);
    return (PyObject *)self->model;
}

static PyObject *get_closed(pm_store *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->store == NULL);
}

static PyObject *store_repr(pm_store *self) {
    if (!self->path) return PyUnicode_FromString("<modattn.Store (not open)>");
    return PyUnicode_FromFormat("<modattn.Store %R%s>", self->path, self->store ? "" : " (closed)");
}

static PyGetSetDef store_getset[] = {
    {"path", (getter)get_path, NULL, "The store's file as given.", NULL},
    {"model", (getter)get_model, NULL, "The Model it indexes and searches with.", NULL},
    {"closed", (getter)get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef store_methods[] = {
    {"index", (PyCFunction)(void (*)(void))store_index, METH_VARARGS | METH_KEYWORDS,
     "index($self, paths, progress=True, *, prune=False, chunk_tokens=0, overlap=-1, max_file_size=0,\n"
     "      file_timeout=30.0, sparse=None)\n--\n\n"
     "Indexes files and folders (recursively) into the store: new and changed documents are\n"
     "chunked, embedded and written, one transaction each. Returns a dict of counts (files_seen,\n"
     "files_indexed, files_unchanged, files_skipped, files_failed, files_pruned, chunks, tokens,\n"
     "bytes_read, seconds, vector_file, interrupted) and the lists errors, skipped, pruned of\n"
     "(path, message). progress=True shows a line on stderr. prune=True removes stored files that\n"
     "are gone. file_timeout: seconds an HTML or PDF file's text may take to extract (0: no\n"
     "limit); past it the file is in errors. Ctrl-C stops the run within about a second: the\n"
     "KeyboardInterrupt says how many documents were committed (they stay), and its .result\n"
     "attribute is this dict for what was done.\n"
     "sparse: a modattn.SparseEncoder whose SPLADE vectors the store keeps too, one per chunk in\n"
     "its transaction (modattn.Store.index also takes the model's folder and loads the store's\n"
     "recorded model when sparse is None, as `modattn index --sparse DIR`)."},
    {"search", (PyCFunction)(void (*)(void))store_search, METH_VARARGS | METH_KEYWORDS,
     "search($self, query, k=10, mode='hybrid', path_prefix=None)\n--\n\n"
     "The k best chunks for query: mode 'hybrid' (meaning and words fused), 'vector' (meaning)\n"
     "or 'keyword' (BM25). A list of dicts: rank, score, path, start_byte, end_byte, line, page,\n"
     "kind, text, chunk_id, vector_rank, keyword_rank, cosine, bm25, highlights ([(start, end)]\n"
     "byte ranges of text), found_by, snippet ((start, end) of text: the best window). An empty\n"
     "store gives []."},
    {"counts", (PyCFunction)store_counts, METH_NOARGS,
     "counts($self)\n--\n\nNumbers of documents, chunks and embeddings stored, and of the sparse\n"
     "(SPLADE) index: sparse_rows (term weights kept) and sparse_chunks (chunks that have any); both\n"
     "0 on a store indexed without sparse=."},
    {"sparse_model", (PyCFunction)store_sparse_model, METH_NOARGS,
     "sparse_model($self)\n--\n\nThe SPLADE model the store's sparse vectors were made with (what\n"
     "index(sparse=...) or `modattn index --sparse DIR` recorded): a dict of name, dir (the folder as\n"
     "given then), identity, top_k and threshold (the pruning); None when it keeps none."},
    {"close", (PyCFunction)store_close, METH_NOARGS, "close($self)\n--\n\nCloses the store (idempotent)."},
    {"__enter__", (PyCFunction)store_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)store_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pm_StoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "modattn.Store",
    .tp_basicsize = sizeof(pm_store),
    .tp_dealloc = (destructor)store_dealloc,
    .tp_repr = (reprfunc)store_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* modattn.Store adds rerank= in Python */
    .tp_doc = "Store(path, model, readonly=False)\n--\n\n"
              "The document store at path (an SQLite file, created if missing unless readonly),\n"
              "bound to model: a store made with another model raises ModelMismatchError.\n"
              "Use as a context manager, or call close().",
    .tp_methods = store_methods,
    .tp_getset = store_getset,
    .tp_init = (initproc)store_init,
    .tp_new = PyType_GenericNew,
};
