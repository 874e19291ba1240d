/* server/sparse.c — POST /embed_sparse (text-embeddings-inference's body and response) when the
 * server runs with --sparse-model DIR: the request parsed and its texts tokenised here (on the HTTP
 * thread, linear in the body that --max-body bounds), encoded on an executor (batch.c, as
 * embeddings are, admission and queue included), and each text's non-zero weights written. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "modattn/sparse.h"
#include "core/internal_core.h"
#include "server/server.h"

void srv_sparse_req_free(srv_sparse_req *r) {
    if (!r) return;
    for (size_t i = 0; r->ids && i < r->n; i++) modattn_free(r->ids[i]);
    if (r->vecs) modattn_sparse_vec_free(r->vecs, r->n);
    modattn_free(r->ids), modattn_free(r->counts), modattn_free(r->vecs);
    memset(r, 0, sizeof *r);
}

int srv_parse_embed_sparse(const srv_api *api, const char *body, size_t len, srv_sparse_req *out, srv_bad *bad) {
    memset(out, 0, sizeof *out);
    if (!api->sparse)
        return srv_bad_req(bad, 404, NULL, "no_sparse_model", "this server has no sparse model: start it with "
                                                            "--sparse-model DIR (a SPLADE model's directory)");
    json_t *root = srv_json_body(body, len, bad);
    if (!root) return -1;
    int rc = -1;
    json_t *in = json_object_get(root, "inputs");
    if (!in || !(json_is_string(in) || json_is_array(in))) {
        srv_bad_req(bad, 422, "inputs", in ? "invalid_type" : "missing_field",
                    "'inputs' is required: a string or a list of strings");
        goto done;
    }
    const bool one = json_is_string(in);
    const size_t n = one ? 1 : json_array_size(in);
    if (n == 0) {
        srv_bad_req(bad, 422, "inputs", "invalid_value", "'inputs' must not be an empty list");
        goto done;
    }
    if (n > api->max_inputs) {
        srv_bad_req(bad, 413, "inputs", "too_many_inputs", "'inputs' has %zu items; this server takes at most %zu a "
                    "request (--max-inputs)", n, api->max_inputs);
        goto done;
    }
    for (size_t i = 0; !one && i < n; i++)
        if (!json_is_string(json_array_get(in, i))) {
            srv_bad_req(bad, 422, "inputs", "invalid_type", "inputs[%zu] must be a string", i);
            goto done;
        }
    bool truncate = api->truncate;
    json_t *tv = json_object_get(root, "truncate");
    if (tv && !json_is_null(tv)) {
        if (!json_is_boolean(tv)) {
            srv_bad_req(bad, 422, "truncate", "invalid_type", "'truncate' must be a boolean");
            goto done;
        }
        truncate = json_is_true(tv);
    }
    json_t *dir = json_object_get(root, "truncation_direction");
    if (dir && !json_is_null(dir) && !(json_is_string(dir) && strcasecmp(json_string_value(dir), "right") == 0)) {
        srv_bad_req(bad, 422, "truncation_direction", "invalid_value", "'truncation_direction' must be \"Right\"");
        goto done;
    }
    modattn_model *m = modattn_sparse_model(api->sparse);
    const size_t T = modattn_sparse_get_info(api->sparse)->max_tokens;
    out->ids = modattn__calloc(n, sizeof *out->ids, MODATTN_MEM_OTHER);
    out->counts = modattn__calloc(n, sizeof *out->counts, MODATTN_MEM_OTHER);
    out->vecs = modattn__calloc(n, sizeof *out->vecs, MODATTN_MEM_OTHER);
    if (!out->ids || !out->counts || !out->vecs) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
        goto done;
    }
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        json_t *s = one ? in : json_array_get(in, i);
        out->ids[i] = modattn__malloc(T * sizeof **out->ids, MODATTN_MEM_OTHER);
        if (!out->ids[i]) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
            goto done;
        }
        bool cut = false;
        int st = modattn_model_tokenize_ex(m, json_string_value(s), json_string_length(s), out->ids[i], T,
                                           &out->counts[i], &cut);
        if (st) {
            if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET)
                srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory tokenizing inputs[%zu]", i);
            else srv_bad_req(bad, 400, "inputs", "invalid_value", "inputs[%zu]: %s", i, modattn_last_error());
            goto done;
        }
        if (cut && !truncate) {
            srv_bad_req(bad, 413, "inputs", "context_length_exceeded",
                        "inputs[%zu] is longer than the sparse model's %zu tokens and truncation is off (send "
                        "\"truncate\": true, or start the server with --truncate)", i, T);
            goto done;
        }
        out->tokens += out->counts[i];
    }
    rc = 0;
done:
    if (rc) srv_sparse_req_free(out);
    json_decref(root);
    return rc;
}

char *srv_sparse_body(const srv_sparse_req *r) {
    json_t *arr = json_array();
    int bad = !arr;
    for (size_t i = 0; i < r->n && !bad; i++) {
        json_t *row = json_array();
        bad = !row;
        for (size_t k = 0; row && k < r->vecs[i].n && !bad; k++) {
            json_t *o = json_pack("{s:I, s:f}", "index", (json_int_t)r->vecs[i].ids[k], "value",
                                  (double)r->vecs[i].weights[k]);
            bad = !o || json_array_append_new(row, o);
        }
        if (row && json_array_append_new(arr, row)) bad = 1;
    }
    char *d = bad ? NULL : json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(arr);
    if (!d || modattn__json_take_failure()) {
        modattn__json_free(d);
        return NULL;
    }
    char *out = strdup(d); /* plain malloc: libmicrohttpd frees what it sends */
    modattn__json_free(d);
    return out;
}
