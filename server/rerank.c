/* server/rerank.c — POST /rerank (text-embeddings-inference's body and response) when the server
 * runs with --rerank-model DIR: the request parsed and its pairs tokenised here (on the HTTP
 * thread, linear in the body that --max-body bounds), scored on an executor (batch.c, as embeddings
 * are, admission and queue included), and the response written best first. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/rerank.h"
#include "core/internal_core.h"
#include "server/server.h"


void srv_rerank_req_free(srv_rerank_req *r) {
    if (!r) return;
    for (size_t i = 0; r->ids && i < r->n; i++) modattn_free(r->ids[i]);
    for (size_t i = 0; r->types && i < r->n; i++) modattn_free(r->types[i]);
    modattn_free(r->ids), modattn_free(r->types), modattn_free(r->counts);
    json_decref(r->texts);
    memset(r, 0, sizeof *r);
}

static int get_bool(json_t *root, const char *name, bool dflt, bool *out, srv_bad *bad) {
    json_t *v = json_object_get(root, name);
    *out = dflt;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return srv_bad_req(bad, 422, name, "invalid_type", "'%s' must be a boolean", name);
    *out = json_is_true(v);
    return 0;
}

int srv_parse_rerank(const srv_api *api, const char *body, size_t len, srv_rerank_req *out, srv_bad *bad) {
    memset(out, 0, sizeof *out);
    if (!api->reranker)
        return srv_bad_req(bad, 404, NULL, "no_reranker", "this server has no reranker: start it with --rerank-model DIR "
                                                      "(a cross-encoder's directory)");
    json_t *root = srv_json_body(body, len, bad);
    if (!root) return -1;
    int rc = -1;
    json_t *q = json_object_get(root, "query"), *t = json_object_get(root, "texts");
    bool truncate;
    if (!q || !json_is_string(q)) {
        srv_bad_req(bad, 422, "query", q ? "invalid_type" : "missing_field", "'query' is required: a string");
        goto done;
    }
    if (json_string_length(q) == 0) {
        srv_bad_req(bad, 422, "query", "invalid_value", "'query' must not be empty");
        goto done;
    }
    if (!t || !json_is_array(t)) {
        srv_bad_req(bad, 422, "texts", t ? "invalid_type" : "missing_field", "'texts' is required: a list of strings");
        goto done;
    }
    const size_t n = json_array_size(t);
    if (n == 0) {
        srv_bad_req(bad, 422, "texts", "invalid_value", "'texts' must not be an empty list");
        goto done;
    }
    const size_t most = api->max_inputs < SRV_RERANK_MAX_TEXTS ? api->max_inputs : SRV_RERANK_MAX_TEXTS;
    if (n > most) {
        srv_bad_req(bad, 413, "texts", "too_many_inputs", "'texts' has %zu items; this server reranks at most %zu a request", n,
                most);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_array_get(t, i))) {
            srv_bad_req(bad, 422, "texts", "invalid_type", "texts[%zu] must be a string", i);
            goto done;
        }
    if (get_bool(root, "raw_scores", false, &out->raw, bad) || get_bool(root, "return_text", false, &out->return_text, bad) ||
        get_bool(root, "truncate", api->truncate, &truncate, bad))
        goto done;
    json_t *dir = json_object_get(root, "truncation_direction");
    if (dir && !json_is_null(dir) && !(json_is_string(dir) && strcasecmp(json_string_value(dir), "right") == 0)) {
        srv_bad_req(bad, 422, "truncation_direction", "invalid_value", "'truncation_direction' must be \"Right\" (the longer side "
                                                                   "of a pair is cut at its end)");
        goto done;
    }
    const modattn_reranker_info *in = modattn_reranker_get_info(api->reranker);
    const size_t T = in->max_tokens;
    out->ids = modattn__calloc(n, sizeof *out->ids, MODATTN_MEM_OTHER);
    out->types = modattn__calloc(n, sizeof *out->types, MODATTN_MEM_OTHER);
    out->counts = modattn__calloc(n, sizeof *out->counts, MODATTN_MEM_OTHER);
    if (!out->ids || !out->types || !out->counts) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
        goto done;
    }
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(t, i);
        out->ids[i] = modattn__malloc(T * sizeof **out->ids, MODATTN_MEM_OTHER);
        out->types[i] = modattn__malloc(T * sizeof **out->types, MODATTN_MEM_OTHER);
        if (!out->ids[i] || !out->types[i]) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
            goto done;
        }
        bool cut = false;
        int st = modattn_reranker_tokenize(api->reranker, json_string_value(q), json_string_length(q), json_string_value(s),
                                           json_string_length(s), out->ids[i], out->types[i], T, &out->counts[i], &cut);
        if (st) {
            if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET)
                srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory tokenizing texts[%zu]", i);
            else srv_bad_req(bad, 400, "texts", "invalid_value", "texts[%zu]: %s", i, modattn_last_error());
            goto done;
        }
        if (cut && !truncate) {
            srv_bad_req(bad, 413, "texts", "context_length_exceeded",
                    "the query with texts[%zu] is longer than the reranker's %zu tokens and truncation is off (send "
                    "\"truncate\": true, or start the server with --truncate)", i, T);
            goto done;
        }
        out->tokens += out->counts[i];
    }
    out->texts = json_incref(t);
    rc = 0;
done:
    if (rc) srv_rerank_req_free(out);
    json_decref(root);
    return rc;
}

typedef struct ranked {
    size_t i;
    float s;
} ranked;

static int by_score(const void *x, const void *y) {
    const ranked *a = x, *b = y;
    if (a->s != b->s) return a->s > b->s ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* [{"index", "score", "text"?}] best first (the first label's score for a model of several:
 * text-embeddings-inference serves one-label rerankers). */
char *srv_rerank_body(const srv_api *api, const srv_rerank_req *r, const float *scores) {
    const size_t L = modattn_reranker_get_info(api->reranker)->num_labels;
    ranked *v = malloc(r->n * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < r->n; i++) v[i] = (ranked){i, scores[i * L]};
    qsort(v, r->n, sizeof *v, by_score);
    json_t *arr = json_array();
    int bad = !arr;
    for (size_t k = 0; k < r->n && !bad; k++) {
        json_t *o = json_pack("{s:I, s:f}", "index", (json_int_t)v[k].i, "score", (double)v[k].s);
        if (!o) bad = 1;
        else if (r->return_text && json_object_set(o, "text", json_array_get(r->texts, v[k].i))) bad = 1;
        if (o && json_array_append_new(arr, o)) bad = 1;
    }
    free(v);
    char *d = bad ? NULL : json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(arr);
    if (!d || modattn__json_take_failure()) {
        modattn__json_free(d);
        return NULL;
    }
    /* plain malloc: libmicrohttpd frees what it sends */
    char *out = strdup(d);
    modattn__json_free(d);
    return out;
}
