/* server/api.c — the routes' JSON. Requests are parsed with jansson and checked field by field:
 * every refusal names the field (OpenAI's `param`) and says what was expected. Responses are
 * OpenAI's shapes; the embeddings response, which can be megabytes of floats, is written by hand
 * (each float with 9 significant digits: it parses back to the same float32), base64 through
 * GLib (little-endian float32 bytes, as OpenAI's).
 *
 * Token-id inputs are word pieces as the model's tokenizer gives them for a text without special
 * tokens; the server adds the model's [CLS] and [SEP] as it does for texts, so ids from
 * `tokenizer(text, add_special_tokens=False)` embed exactly as the text does. */
#define _GNU_SOURCE
#include <glib.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "modattn/ingest.h"
#include "modattn/rerank.h"
#include "modattn/store.h"
#include "modattn/search.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_search.h"
#include "pipeline/pipeline_internal.h"
#include "server/server.h"

/* ---- errors */

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 408: return "timeout_error";
    case 429: return "rate_limit_error";
    case 500: return "server_error";
    case 503: return "service_unavailable_error";
    default: return "invalid_request_error";
    }
}

char *srv_error_body(int status, const char *message, const char *param, const char *code) {
    /* messages may quote user input: ill-formed UTF-8 becomes U+FFFD so the JSON stays valid */
    char *clean = modattn__utf8_valid(message, strlen(message)) ? NULL : modattn__utf8_sanitize(message, strlen(message), NULL);
    json_t *e = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", clean ? clean : message, "type",
                          error_type(status), "param", param && *param ? json_string(param) : json_null(), "code",
                          code ? json_string(code) : json_null());
    modattn_free(clean);
    char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (modattn__json_take_failure()) { /* over the budget: the text may be wrong, so none */
        modattn__json_free(s);
        return NULL;
    }
    if (!s) return NULL;
    char *out = strdup(s); /* callers free() */
    modattn__json_free(s);
    return out;
}

int srv_bad_req(srv_bad *bad, int status, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bad->message, sizeof bad->message, fmt, ap);
    va_end(ap);
    bad->status = status;
    snprintf(bad->param, sizeof bad->param, "%s", param ? param : "");
    bad->code = code;
    return -1;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* jansson takes no NUL in an object key ("\u0000"): in a copy of the body, each such escape inside
 * a key becomes "\ufffd" (same length). Keys are only matched against ours, which hold no NUL, so
 * nothing the server reads changes; strings that are values are left alone. NULL if none. */
static char *mend_nul_keys(const char *body, size_t len) {
    char *c = malloc(len + 1);
    if (!c) return NULL;
    memcpy(c, body, len);
    c[len] = '\0';
    bool changed = false;
    for (size_t i = 0; i < len; i++) {
        if (c[i] != '"') continue;
        size_t start = i++, end;
        while (i < len && c[i] != '"') i += c[i] == '\\' ? 2 : 1;
        end = i;
        if (end >= len) break;
        size_t j = end + 1;
        while (j < len && (c[j] == ' ' || c[j] == '\t' || c[j] == '\n' || c[j] == '\r')) j++;
        if (j >= len || c[j] != ':') continue; /* a value, not a key */
        for (size_t k = start + 1; k + 6 <= end; k++) {
            if (c[k] != '\\') continue;
            if (c[k + 1] == 'u' && c[k + 2] == '0' && c[k + 3] == '0' && c[k + 4] == '0' && c[k + 5] == '0') {
                memcpy(c + k, "\\ufffd", 6);
                changed = true;
            }
            k++; /* the escaped character */
        }
    }
    if (!changed) {
        free(c);
        return NULL;
    }
    return c;
}

/* The body as a JSON object, or a 400 saying why not. */
static json_t *parse_body(const char *body, size_t len, srv_bad *bad) {
    json_t *root = NULL;
    json_error_t err;
    const size_t flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL; /* a text may hold U+0000 */
    int st = modattn__json_loadb(body, len, flags, &root, &err);
    if (st == MODATTN_EFORMAT && strstr(err.text, "NUL byte in object key")) {
        char *mended = mend_nul_keys(body, len);
        if (mended) {
            st = modattn__json_loadb(mended, len, flags, &root, &err);
            free(mended);
        }
    }
    if (st == MODATTN_EFORMAT && strstr(err.text, "too big")) {
        /* valid JSON with an integer past 64 bits (in a field we may not even read): parse the
         * numbers as reals; integer fields then take integral reals (get_int) */
        st = modattn__json_loadb(body, len, flags | JSON_DECODE_INT_AS_REAL, &root, &err);
    }
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory (or over its --mem-budget) reading the body");
        return NULL;
    }
    if (st) {
        srv_bad_req(bad, 400, NULL, "invalid_json", "the body is not valid JSON: %s", modattn_last_error());
        return NULL;
    }
    if (!json_is_object(root)) {
        srv_bad_req(bad, 400, NULL, "invalid_json", "the body must be a JSON object, not %s", json_kind(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* An integer field: a JSON integer, or (numbers parsed as reals, see parse_body) an integral
 * real within +-2^53. */
static bool get_int(const json_t *v, long long *out) {
    if (json_is_integer(v)) {
        *out = (long long)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d >= -9007199254740992.0 && d <= 9007199254740992.0 && d == (double)(long long)d) {
            *out = (long long)d;
            return true;
        }
    }
    return false;
}

static int check_model(const srv_api *api, json_t *root, srv_bad *bad) {
    json_t *m = json_object_get(root, "model");
    if (!m || json_is_null(m)) return 0;
    if (!json_is_string(m)) return srv_bad_req(bad, 400, "model", "invalid_type", "'model' must be a string, not %s", json_kind(m));
    if (strcmp(json_string_value(m), api->model_id) != 0)
        return srv_bad_req(bad, 404, "model", "model_not_found", "the model '%.200s' is not served here; this server serves '%s'",
                       json_string_value(m), api->model_id);
    return 0;
}

/* ---- POST /v1/embeddings */

void srv_embed_req_free(srv_embed_req *r) {
    if (!r) return;
    for (size_t i = 0; r->ids && i < r->n; i++) modattn_free(r->ids[i]);
    modattn_free(r->ids);
    modattn_free(r->counts);
    memset(r, 0, sizeof *r);
}

/* A token list (word pieces, no specials) into [CLS] pieces [SEP]. */
static int take_ids(const srv_api *api, json_t *arr, size_t idx, bool whole_input, bool truncate, srv_embed_req *out,
                    srv_bad *bad) {
    char param[48];
    if (whole_input) snprintf(param, sizeof param, "input");
    else snprintf(param, sizeof param, "input[%zu]", idx);
    size_t m = json_array_size(arr);
    if (m == 0) return srv_bad_req(bad, 400, param, "invalid_value", "%s: a list of token ids must not be empty", param);
    const size_t room = api->max_tokens - 2; /* [CLS] and [SEP] */
    if (m > room && !truncate)
        return srv_bad_req(bad, 422, param, "context_length_exceeded",
                       "%s has %zu tokens; with [CLS] and [SEP] that is more than the model's %zu, and truncation is off",
                       param, m, api->max_tokens);
    size_t keep = m > room ? room : m;
    int32_t *ids = modattn__malloc((keep + 2) * sizeof *ids, MODATTN_MEM_OTHER);
    if (!ids) return srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
    ids[0] = api->cls_id;
    for (size_t k = 0; k < m; k++) {
        json_t *v = json_array_get(arr, k);
        long long id = 0;
        const bool is_int = get_int(v, &id);
        if (!is_int || id < 0 || id >= (long long)api->vocab) {
            modattn_free(ids);
            if (!is_int)
                return srv_bad_req(bad, 400, param, "invalid_type", "%s[%zu]: a token id must be an integer, not %s", param, k,
                               json_kind(v));
            return srv_bad_req(bad, 400, param, "invalid_value", "%s[%zu]: token id %lld is outside the vocabulary [0, %zu)",
                           param, k, id, api->vocab);
        }
        if (k < keep) ids[1 + k] = (int32_t)id;
    }
    ids[keep + 1] = api->sep_id;
    out->ids[idx] = ids;
    out->counts[idx] = keep + 2;
    out->prompt_tokens += keep + 2;
    return 0;
}

/* prompt + text into a new string (NULL: out of memory) */
static char *prompted(const char *prompt, const char *text, size_t len, size_t *out_len) {
    const size_t pl = strlen(prompt);
    char *t = modattn__malloc(pl + len + 1, MODATTN_MEM_OTHER);
    if (!t) return NULL;
    memcpy(t, prompt, pl);
    memcpy(t + pl, text, len);
    t[pl + len] = '\0';
    *out_len = pl + len;
    return t;
}

/* "prompt" / "prompt_name" of a request: the prompt for task (modattn_model_resolve_prompt), as an
 * owned copy ("" when none applies) in *out; *given: the request named one. 0, or -1 with bad set. */
static int take_prompt(const srv_api *api, json_t *root, modattn_embed_task task, char **out, bool *given,
                       srv_bad *bad) {
    modattn_embed_options eo = {.task = task};
    static const char *const keys[2] = {"prompt", "prompt_name"};
    *given = false;
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(root, keys[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v))
            return srv_bad_req(bad, 400, keys[i], "invalid_type", "'%s' must be a string, not %s", keys[i], json_kind(v));
        if (memchr(json_string_value(v), '\0', json_string_length(v)))
            return srv_bad_req(bad, 400, keys[i], "invalid_value", "'%s' holds U+0000", keys[i]);
        if (*given) return srv_bad_req(bad, 400, "prompt", "invalid_value", "give 'prompt' or 'prompt_name', not both");
        *given = true;
        if (i == 0) eo.prompt = json_string_value(v);
        else eo.prompt_name = json_string_value(v);
    }
    const char *t = NULL;
    if (modattn_model_resolve_prompt(api->model, &eo, &t, NULL))
        return srv_bad_req(bad, 400, "prompt_name", "invalid_value", "%s", modattn_last_error());
    if (!(*out = modattn__strdup(t ? t : "", MODATTN_MEM_OTHER)))
        return srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
    return 0;
}

static int take_text(const srv_api *api, json_t *s, size_t idx, bool whole_input, bool truncate, const char *prompt,
                     srv_embed_req *out, srv_bad *bad) {
    char param[48];
    if (whole_input) snprintf(param, sizeof param, "input");
    else snprintf(param, sizeof param, "input[%zu]", idx);
    int32_t *ids = modattn__malloc(api->max_tokens * sizeof *ids, MODATTN_MEM_OTHER);
    if (!ids) return srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
    size_t n = 0, tl = json_string_length(s);
    bool cut = false;
    char *pt = NULL;
    const char *text = json_string_value(s);
    if (prompt && *prompt && !(text = pt = prompted(prompt, text, tl, &tl))) {
        modattn_free(ids);
        return srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
    }
    int st = modattn_model_tokenize_ex(api->model, text, tl, ids, api->max_tokens, &n, &cut);
    modattn_free(pt);
    if (st) {
        modattn_free(ids);
        if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET)
            return srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory tokenizing %s", param);
        return srv_bad_req(bad, 400, param, "invalid_value", "%s: %s", param, modattn_last_error());
    }
    if (cut && !truncate) {
        modattn_free(ids);
        return srv_bad_req(bad, 422, param, "context_length_exceeded",
                       "%s is longer than the model's %zu tokens ([CLS] and [SEP] included) and truncation is off "
                       "(send \"truncate\": true, or start the server with --truncate)", param, api->max_tokens);
    }
    out->ids[idx] = ids;
    out->counts[idx] = n;
    out->prompt_tokens += n;
    return 0;
}

int srv_parse_embeddings(const srv_api *api, const char *body, size_t len, srv_embed_req *out, srv_bad *bad) {
    memset(out, 0, sizeof *out);
    json_t *root = parse_body(body, len, bad);
    if (!root) return -1;
    int rc = -1;
    char *prompt = NULL;
    if (check_model(api, root, bad)) goto done;
    bool truncate = api->truncate;
    json_t *t = json_object_get(root, "truncate");
    if (t && !json_is_null(t)) {
        if (!json_is_boolean(t)) {
            srv_bad_req(bad, 400, "truncate", "invalid_type", "'truncate' must be true or false, not %s", json_kind(t));
            goto done;
        }
        truncate = json_is_true(t);
    }
    json_t *fmt = json_object_get(root, "encoding_format");
    if (fmt && !json_is_null(fmt)) {
        if (!json_is_string(fmt) ||
            (strcmp(json_string_value(fmt), "float") != 0 && strcmp(json_string_value(fmt), "base64") != 0)) {
            srv_bad_req(bad, 400, "encoding_format", "invalid_value", "'encoding_format' must be \"float\" or \"base64\"%s%.100s%s",
                    json_is_string(fmt) ? ", not \"" : "", json_is_string(fmt) ? json_string_value(fmt) : "",
                    json_is_string(fmt) ? "\"" : "");
            goto done;
        }
        out->base64 = strcmp(json_string_value(fmt), "base64") == 0;
    }
    json_t *dims = json_object_get(root, "dimensions");
    if (dims && !json_is_null(dims)) {
        long long dv = 0;
        if (!get_int(dims, &dv)) {
            srv_bad_req(bad, 400, "dimensions", "invalid_type", "'dimensions' must be an integer, not %s", json_kind(dims));
            goto done;
        }
        if (dv < 1 || dv > (long long)api->dim) {
            srv_bad_req(bad, 400, "dimensions", "invalid_value",
                    "'dimensions' is %lld, but %s gives vectors of %zu dimensions: ask for 1 to %zu (the first ones, "
                    "normalised again)", dv, api->model_id, api->dim, api->dim);
            goto done;
        }
        out->dims = (size_t)dv;
    } else {
        out->dims = modattn_model_embed_dim(api->model, NULL); /* the model's truncate_dim, else all */
    }
    bool prompt_given = false;
    if (take_prompt(api, root, MODATTN_EMBED_PLAIN, &prompt, &prompt_given, bad)) goto done;
    json_t *user = json_object_get(root, "user");
    if (user && !json_is_null(user) && !json_is_string(user)) {
        srv_bad_req(bad, 400, "user", "invalid_type", "'user' must be a string, not %s", json_kind(user));
        goto done;
    }
    json_t *in = json_object_get(root, "input");
    if (!in || json_is_null(in)) {
        srv_bad_req(bad, 400, "input", "missing_field", "'input' is required: a string, an array of strings, an array of "
                                                  "token ids or an array of arrays of token ids");
        goto done;
    }
    /* the shapes: "text" | ["text", ...] | [id, ...] (one input) | [[id, ...], ...] */
    enum { TEXTS, ONE_IDS, IDS_LISTS } shape;
    size_t n;
    if (json_is_string(in)) {
        shape = TEXTS;
        n = 1;
    } else if (json_is_array(in)) {
        n = json_array_size(in);
        if (n == 0) {
            srv_bad_req(bad, 400, "input", "invalid_value", "'input' must not be an empty array");
            goto done;
        }
        json_t *first = json_array_get(in, 0);
        if (json_is_string(first)) shape = TEXTS;
        else if (json_is_integer(first) || json_is_real(first)) shape = ONE_IDS; /* a real: refused as an id below */
        else if (json_is_array(first)) shape = IDS_LISTS;
        else {
            srv_bad_req(bad, 400, "input[0]", "invalid_type",
                    "input[0]: expected a string, a token id or an array of token ids, not %s", json_kind(first));
            goto done;
        }
        if (shape == ONE_IDS) n = 1;
    } else {
        srv_bad_req(bad, 400, "input", "invalid_type", "'input' must be a string or an array, not %s", json_kind(in));
        goto done;
    }
    if (n > api->max_inputs) {
        srv_bad_req(bad, 413, "input", "too_many_inputs", "'input' has %zu inputs; this server takes at most %zu per request "
                                                     "(--max-inputs)", n, api->max_inputs);
        goto done;
    }
    out->n = n;
    out->ids = modattn__calloc(n, sizeof *out->ids, MODATTN_MEM_OTHER);
    out->counts = modattn__calloc(n, sizeof *out->counts, MODATTN_MEM_OTHER);
    if (!out->ids || !out->counts) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
        goto done;
    }
    if (prompt_given && prompt && prompt[0] && shape != TEXTS) { /* an empty prompt applies nothing */
        /* 422: the body is schema-valid (openapi.json cannot say "no prompt with token ids") but
         * cannot be processed as asked */
        srv_bad_req(bad, 422, "prompt", "invalid_value", "a prompt applies to texts: 'input' holds token ids");
        goto done;
    }
    if (json_is_string(in)) {
        if (take_text(api, in, 0, true, truncate, prompt, out, bad)) goto done;
    } else if (shape == ONE_IDS) {
        if (take_ids(api, in, 0, true, truncate, out, bad)) goto done;
    } else {
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(in, i);
            char param[48];
            snprintf(param, sizeof param, "input[%zu]", i);
            if (shape == TEXTS && !json_is_string(v)) {
                srv_bad_req(bad, 400, param, "invalid_type", "%s: expected a string like input[0], not %s", param, json_kind(v));
                goto done;
            }
            if (shape == IDS_LISTS && !json_is_array(v)) {
                srv_bad_req(bad, 400, param, "invalid_type", "%s: expected an array of token ids like input[0], not %s", param,
                        json_kind(v));
                goto done;
            }
            if (shape == TEXTS ? take_text(api, v, i, false, truncate, prompt, out, bad)
                               : take_ids(api, v, i, false, truncate, out, bad))
                goto done;
        }
    }
    rc = 0;
done:
    modattn_free(prompt);
    json_decref(root);
    modattn__json_take_failure(); /* a refusal while parsing shows as a parse error above */
    if (rc) srv_embed_req_free(out);
    return rc;
}

/* ---- a growing text buffer (plain malloc: a response is handed to libmicrohttpd, which frees it) */

void srv_buf_reserve(srv_buf *b, size_t more) {
    if (b->failed || b->n + more < b->cap) return;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc <= b->n + more) nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
        b->failed = true;
        return;
    }
    b->p = np;
    b->cap = nc;
}

void srv_buf_put(srv_buf *b, const char *s, size_t len) {
    srv_buf_reserve(b, len + 1);
    if (b->failed) return;
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

void srv_buf_printf(srv_buf *b, const char *fmt, ...) {
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        srv_buf_reserve(b, 256);
        if (b->failed) return;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) break;
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        srv_buf_reserve(b, (size_t)k + 1); /* then once more, with room */
    }
    b->failed = true;
}

char *srv_buf_take(srv_buf *b) {
    if (b->failed || !b->p) {
        free(b->p);
        memset(b, 0, sizeof *b);
        return NULL;
    }
    char *p = b->p;
    memset(b, 0, sizeof *b);
    return p;
}

/* A JSON string (quotes and escapes by jansson), ill-formed UTF-8 replaced by U+FFFD. */
static void tb_json_string(srv_buf *b, const char *s) {
    char *clean = modattn__utf8_valid(s, strlen(s)) ? NULL : modattn__utf8_sanitize(s, strlen(s), NULL);
    json_t *j = json_string(clean ? clean : s);
    modattn_free(clean);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!d || modattn__json_take_failure()) b->failed = true;
    else srv_buf_put(b, d, strlen(d));
    modattn__json_free(d);
}

char *srv_embeddings_body(const srv_api *api, const srv_embed_req *r, const float *vec) {
    const size_t D = r->dims ? r->dims : api->dim; /* Matryoshka: cut by the server (server.c) */
    srv_buf b = {0};
    srv_buf_reserve(&b, r->n * D * (r->base64 ? 6 : 17) + 256);
    srv_buf_put(&b, "{\"object\":\"list\",\"data\":[", 25);
    for (size_t i = 0; i < r->n && !b.failed; i++) {
        srv_buf_printf(&b, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "", i);
        const float *v = vec + i * D;
        if (r->base64) {
            /* little-endian float32 bytes (this host is little-endian: x86-64, AArch64) */
            gchar *enc = g_base64_encode((const guchar *)v, D * sizeof(float));
            if (!enc) b.failed = true;
            else {
                srv_buf_put(&b, "\"", 1);
                srv_buf_put(&b, enc, strlen(enc));
                srv_buf_put(&b, "\"", 1);
                g_free(enc);
            }
        } else {
            srv_buf_reserve(&b, D * 18 + 4);
            if (b.failed) break;
            b.p[b.n++] = '[';
            for (size_t k = 0; k < D; k++) {
                int w = snprintf(b.p + b.n, b.cap - b.n, k ? ",%.9g" : "%.9g", (double)v[k]);
                b.n += (size_t)w;
            }
            b.p[b.n++] = ']';
            b.p[b.n] = '\0';
        }
        srv_buf_put(&b, "}", 1);
    }
    srv_buf_put(&b, "],\"model\":", 10);
    tb_json_string(&b, api->model_id);
    srv_buf_printf(&b, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}", r->prompt_tokens, r->prompt_tokens);
    return srv_buf_take(&b);
}

/* ---- POST /search */

void srv_search_req_free(srv_search_req *r) {
    if (!r) return;
    modattn_free(r->query);
    modattn_free(r->path_prefix);
    modattn_free(r->ids);
    modattn_free(r->prompt);
    memset(r, 0, sizeof *r);
}

/* An optional number of the fusion, in (0, 1e6]: 0 and *out untouched when absent or null, -1 (and
 * bad set) when not a number or out of range. */
static int fusion_param(json_t *root, const char *name, const char *why, double *out, srv_bad *bad) {
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) {
        srv_bad_req(bad, 400, name, "invalid_type", "'%s' must be a number, not %s", name, json_kind(v));
        return -1;
    }
    const double x = json_number_value(v);
    if (!(x > 0 && x <= 1e6)) {
        srv_bad_req(bad, 400, name, "invalid_value", "'%s' must be above 0 and at most 1e6%s", name, why);
        return -1;
    }
    *out = x;
    return 0;
}

int srv_parse_search(const srv_api *api, const char *body, size_t len, srv_search_req *out, srv_bad *bad) {
    memset(out, 0, sizeof *out);
    out->k = MODATTN_SEARCH_DEFAULT_K; /* as `modattn search` and Python's Store.search */
    out->rerank_top = SRV_SEARCH_RERANK_TOP;
    json_t *root = parse_body(body, len, bad);
    if (!root) return -1;
    int rc = -1;
    if (check_model(api, root, bad)) goto done;
    json_t *q = json_object_get(root, "query");
    if (!q || json_is_null(q)) {
        srv_bad_req(bad, 400, "query", "missing_field", "'query' is required: the text to search for");
        goto done;
    }
    if (!json_is_string(q)) {
        srv_bad_req(bad, 400, "query", "invalid_type", "'query' must be a string, not %s", json_kind(q));
        goto done;
    }
    json_t *k = json_object_get(root, "k");
    if (k && !json_is_null(k)) {
        long long kv = 0;
        if (!get_int(k, &kv)) {
            srv_bad_req(bad, 400, "k", "invalid_type", "'k' must be an integer, not %s", json_kind(k));
            goto done;
        }
        if (kv < 1 || kv > 10000) {
            srv_bad_req(bad, 400, "k", "invalid_value", "'k' must be from 1 to 10000, not %lld", kv);
            goto done;
        }
        out->k = (size_t)kv;
    }
    json_t *md = json_object_get(root, "mode");
    out->mode = MODATTN_SEARCH_HYBRID;
    if (md && !json_is_null(md)) {
        const char *m = json_is_string(md) ? json_string_value(md) : "";
        if (strcmp(m, "hybrid") == 0) out->mode = MODATTN_SEARCH_HYBRID;
        else if (strcmp(m, "vector") == 0) out->mode = MODATTN_SEARCH_VECTOR;
        else if (strcmp(m, "keyword") == 0) out->mode = MODATTN_SEARCH_KEYWORD;
        else if (strcmp(m, "sparse") == 0) out->mode = MODATTN_SEARCH_SPARSE;
        else {
            srv_bad_req(bad, 400, "mode", json_is_string(md) ? "invalid_value" : "invalid_type",
                    "'mode' must be \"hybrid\", \"vector\", \"keyword\" or \"sparse\"");
            goto done;
        }
    }
    if (fusion_param(root, "keyword_weight", " (the vector ranking's weight is 1)", &out->keyword_weight, bad) ||
        fusion_param(root, "sparse_weight", " (the vector ranking's weight is 1)", &out->sparse_weight, bad) ||
        fusion_param(root, "rrf_k", "", &out->rrf_k, bad))
        goto done;
    /* second stage: the candidates re-scored by the cross-encoder of --rerank-model */
    json_t *rr = json_object_get(root, "rerank"), *rt = json_object_get(root, "rerank_top");
    if (rr && !json_is_null(rr)) {
        if (!json_is_boolean(rr)) {
            srv_bad_req(bad, 400, "rerank", "invalid_type", "'rerank' must be a boolean, not %s", json_kind(rr));
            goto done;
        }
        out->rerank = json_is_true(rr);
    }
    if (rt && !json_is_null(rt)) {
        long long tv = 0;
        if (!get_int(rt, &tv)) {
            srv_bad_req(bad, 400, "rerank_top", "invalid_type", "'rerank_top' must be an integer, not %s", json_kind(rt));
            goto done;
        }
        const size_t most = api->max_inputs < SRV_RERANK_MAX_TEXTS ? api->max_inputs : SRV_RERANK_MAX_TEXTS;
        if (tv < 1) {
            srv_bad_req(bad, 400, "rerank_top", "invalid_value", "'rerank_top' must be from 1 to %zu, not %lld", most, tv);
            goto done;
        }
        if ((unsigned long long)tv > most) {
            srv_bad_req(bad, 413, "rerank_top", "too_many_inputs",
                        "'rerank_top' is %lld; this server reranks at most %zu candidates a request (--max-inputs, "
                        "at most %d)", tv, most, SRV_RERANK_MAX_TEXTS);
            goto done;
        }
        out->rerank_top = (size_t)tv;
    }
    if (out->mode == MODATTN_SEARCH_SPARSE && !api->sparse) {
        srv_bad_req(bad, 422, "mode", "no_sparse_model",
                    "mode \"sparse\" needs the store's SPLADE model and this server has none: start it with "
                    "--sparse-model DIR (the model `modattn index --sparse DIR` used)");
        goto done;
    }
    if (out->rerank && !api->reranker) {
        srv_bad_req(bad, 422, "rerank", "no_reranker",
                    "'rerank' needs a cross-encoder and this server has none: start it with --rerank-model DIR (a "
                    "cross-encoder's directory)");
        goto done;
    }
    if (out->rerank && modattn_reranker_get_info(api->reranker)->num_labels != 1) {
        srv_bad_req(bad, 422, "rerank", "invalid_value",
                    "'rerank' orders results by a relevance score: the cross-encoder of --rerank-model (%s) gives %zu "
                    "label scores a pair, not one",
                    modattn_reranker_get_info(api->reranker)->name, modattn_reranker_get_info(api->reranker)->num_labels);
        goto done;
    }
    json_t *p = json_object_get(root, "path_prefix");
    if (p && !json_is_null(p)) {
        if (!json_is_string(p)) {
            srv_bad_req(bad, 400, "path_prefix", "invalid_type", "'path_prefix' must be a string, not %s", json_kind(p));
            goto done;
        }
        if (memchr(json_string_value(p), '\0', json_string_length(p))) {
            srv_bad_req(bad, 400, "path_prefix", "invalid_value", "'path_prefix' holds U+0000, which no stored path does");
            goto done;
        }
        if (!(out->path_prefix = modattn__strdup(json_string_value(p), MODATTN_MEM_OTHER))) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
            goto done;
        }
    }
    out->query = modattn__strndup(json_string_value(q), json_string_length(q), MODATTN_MEM_OTHER);
    out->query_len = json_string_length(q);
    out->ids = modattn__malloc(api->max_tokens * sizeof *out->ids, MODATTN_MEM_OTHER);
    if (!out->query || !out->ids) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
        goto done;
    }
    /* the query's prompt (the model's query prompt unless the request names one) */
    if (take_prompt(api, root, MODATTN_EMBED_QUERY, &out->prompt, &out->prompt_given, bad)) goto done;
    size_t ql = json_string_length(q);
    char *pq = NULL;
    const char *qtext = json_string_value(q);
    if (*out->prompt && !(qtext = pq = prompted(out->prompt, qtext, ql, &ql))) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
        goto done;
    }
    /* a query longer than the model's length is cut, as `modattn search` does */
    int st = modattn_model_tokenize(api->model, qtext, ql, out->ids, api->max_tokens, &out->count);
    modattn_free(pq);
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) {
        srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory tokenizing the query");
        goto done;
    }
    if (st) {
        srv_bad_req(bad, 400, "query", "invalid_value", "query: %s", modattn_last_error());
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    modattn__json_take_failure();
    if (rc) srv_search_req_free(out);
    return rc;
}

static void tb_path(srv_buf *b, const char *path) {
    srv_buf_put(b, "\"path\":", 7);
    tb_json_string(b, path);
    if (!modattn__utf8_valid(path, strlen(path))) { /* the name's bytes, losslessly, as the CLI does */
        srv_buf_put(b, ",\"path_bytes\":\"", 15);
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) srv_buf_printf(b, "%02x", *p);
        srv_buf_put(b, "\"", 1);
    }
}

char *srv_search_body(const srv_api *api, const srv_job *job) {
    srv_buf b = {0};
    srv_buf_put(&b, "{\"object\":\"list\",\"model\":", 25);
    tb_json_string(&b, api->model_id);
    srv_buf_printf(&b, ",\"mode\":\"%s\",\"vectors\":\"%s\",\"index\":\"%s\",\"results\":[",
                   modattn_search_mode_name((modattn_search_mode)job->mode), job->vectors_mapped ? "vector_file" : "store",
                   job->mode == MODATTN_SEARCH_KEYWORD || job->mode == MODATTN_SEARCH_SPARSE ? "none"
                   : job->ann_kind ? modattn_ann_kind_name((modattn_ann_kind)job->ann_kind) : "exact");
    /* the k asked for (a reranked search fetched rerank_top candidates) */
    const size_t shown = job->k_show && job->k_show < job->nresults ? job->k_show : job->nresults;
    for (size_t i = 0; i < shown && !b.failed; i++) {
        const modattn_search_result *r = &job->results[i];
        const modattn_store_chunk *c = &r->chunk;
        srv_buf_printf(&b, "%s{\"rank\":%d,\"score\":%.9g,", i ? "," : "", r->rank, (double)r->score);
        if (job->rerank && i < job->nreranked) /* the first stage's, as `modattn search --rerank --json` */
            srv_buf_printf(&b, "\"first_stage_rank\":%d,\"first_stage_score\":%.9g,", job->first_rank[i],
                           (double)job->first_score[i]);
        if (r->vector_rank) srv_buf_printf(&b, "\"vector_rank\":%d,", r->vector_rank);
        else srv_buf_printf(&b, "\"vector_rank\":null,");
        if (r->keyword_rank) srv_buf_printf(&b, "\"keyword_rank\":%d,", r->keyword_rank);
        else srv_buf_printf(&b, "\"keyword_rank\":null,");
        /* which rankings found it, as the CLI's "found_by" (docs/FIELDS.md) */
        if (r->sparse_rank) srv_buf_printf(&b, "\"sparse_rank\":%d,\"sparse_score\":%.9g,", r->sparse_rank, r->sparse_score);
        srv_buf_printf(&b, "\"found_by\":\"%s\",", modattn__search_found_by(r));
        srv_buf_printf(&b, "\"highlights\":[");
        for (size_t h = 0; h < r->nspans; h++)
            srv_buf_printf(&b, "%s[%zu,%zu]", h ? "," : "", r->spans[h].start, r->spans[h].end);
        srv_buf_printf(&b, "],\"snippet\":[%zu,%zu],", r->snippet_start, r->snippet_end);
        tb_path(&b, c->path);
        srv_buf_printf(&b, ",\"kind\":");
        tb_json_string(&b, c->kind);
        srv_buf_printf(&b, ",\"chunk_id\":%lld,\"start\":%lld,\"end\":%lld,", (long long)c->id, (long long)c->start,
                       (long long)c->end);
        if (isfinite(r->cosine)) srv_buf_printf(&b, "\"cosine\":%.9g,", (double)r->cosine);
        else srv_buf_printf(&b, "\"cosine\":null,");
        if (isfinite(r->bm25)) srv_buf_printf(&b, "\"bm25\":%.9g,", r->bm25);
        else srv_buf_printf(&b, "\"bm25\":null,");
        if (c->page > 0) srv_buf_printf(&b, "\"page\":%lld,\"line\":null,", (long long)c->page);
        else srv_buf_printf(&b, "\"page\":null,\"line\":%lld,", (long long)c->line);
        srv_buf_printf(&b, "\"text\":");
        tb_json_string(&b, c->text);
        srv_buf_put(&b, "}", 1);
    }
    srv_buf_put(&b, "]", 1);
    if (job->rerank && api->reranker) { /* the cross-encoder that ordered them, as the CLI's "rerank" */
        srv_buf_put(&b, ",\"rerank\":", 10);
        tb_json_string(&b, modattn_reranker_get_info(api->reranker)->name);
    }
    srv_buf_put(&b, "}", 1);
    return srv_buf_take(&b);
}

/* ---- GET /v1/models */

char *srv_models_body(const srv_api *api) {
    srv_buf b = {0};
    srv_buf_put(&b, "{\"object\":\"list\",\"data\":[{\"id\":", 31);
    tb_json_string(&b, api->model_id);
    srv_buf_printf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"modattn\",\"dimensions\":%zu,\"max_tokens\":%zu}]}",
              (long long)api->created, api->dim, api->max_tokens);
    return srv_buf_take(&b);
}

/* ---- GET /openapi.json: the committed document with this server's model and limits filled in */

static json_t *at(json_t *o, const char *path) { /* "a.b.c" of objects */
    char key[64];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        o = json_object_get(o, key);
        path += n + (dot ? 1 : 0);
    }
    return o;
}

int srv_openapi_for(const srv_api *api, char **doc) {
    *doc = NULL;
    json_t *d = NULL;
    json_error_t err;
    const int st = modattn__json_loadb(srv_openapi_json, srv_openapi_json_len, 0, &d, &err);
    if (st) { /* a build that embedded a broken server/openapi.json is a bug of ours, not a lack of memory */
        if (st != MODATTN_ENOMEM)
            return modattn__error(MODATTN_EINTERNAL,
                                 "the built-in OpenAPI document (server/openapi.json) is not valid JSON: line %d: %s",
                                 err.line, err.text);
        return modattn__error(MODATTN_ENOMEM, "making the OpenAPI document: out of memory");
    }
    json_t *S = at(d, "components.schemas");
    const char *models[] = {"EmbeddingsRequest.properties.model", "SearchRequest.properties.model"};
    for (size_t i = 0; i < 2; i++) {
        json_t *m = at(S, models[i]);
        if (m) json_object_set_new(m, "enum", json_pack("[s, n]", api->model_id));
    }
    /* the model's prompt names (null: none named) */
    const char *pnames[] = {"EmbeddingsRequest.properties.prompt_name", "SearchRequest.properties.prompt_name"};
    for (size_t i = 0; i < 2; i++) {
        json_t *pn = at(S, pnames[i]), *e = pn ? json_array() : NULL;
        for (size_t k = 0; e && k < modattn_model_prompt_count(api->model); k++) {
            const char *name = NULL;
            if (modattn_model_prompt_at(api->model, k, &name, NULL) == 0) json_array_append_new(e, json_string(name));
        }
        if (e) json_array_append_new(e, json_null()), json_object_set_new(pn, "enum", e);
    }
    json_t *dims = at(S, "EmbeddingsRequest.properties.dimensions");
    if (dims) {
        json_object_set_new(dims, "minimum", json_integer(1));
        json_object_set_new(dims, "maximum", json_integer((json_int_t)api->dim));
    }
    json_t *rtop = at(S, "SearchRequest.properties.rerank_top");
    if (rtop)
        json_object_set_new(rtop, "maximum", json_integer((json_int_t)(api->max_inputs < SRV_RERANK_MAX_TEXTS
                                                                           ? api->max_inputs
                                                                           : SRV_RERANK_MAX_TEXTS)));
    json_t *ids = at(S, "TokenIds.items");
    if (ids) json_object_set_new(ids, "maximum", json_integer((json_int_t)api->vocab - 1));
    const char *lists[] = {"EmbeddingsRequest.properties.input", "TokenizeRequest.properties.inputs",
                           "DetokenizeRequest.properties.ids"};
    for (size_t l = 0; l < sizeof lists / sizeof *lists; l++) {
        json_t *one = json_object_get(at(S, lists[l]), "oneOf");
        for (size_t i = 0; i < json_array_size(one); i++) {
            json_t *alt = json_array_get(one, i);
            if (json_object_get(alt, "maxItems"))
                json_object_set_new(alt, "maxItems", json_integer((json_int_t)api->max_inputs));
        }
    }
    char *txt = json_dumps(d, JSON_INDENT(2));
    json_decref(d);
    if (modattn__json_take_failure() || !txt) {
        modattn__json_free(txt);
        return modattn__error(MODATTN_ENOMEM, "making the OpenAPI document: out of memory");
    }
    *doc = strdup(txt);
    modattn__json_free(txt);
    return *doc ? 0 : modattn__error(MODATTN_ENOMEM, "making the OpenAPI document: out of memory");
}

/* ---- GET /v1/models/{id}, GET /info */

char *srv_model_body(const srv_api *api) {
    srv_buf b = {0};
    srv_buf_put(&b, "{\"id\":", 6);
    tb_json_string(&b, api->model_id);
    srv_buf_printf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"modattn\",\"dimensions\":%zu,\"max_tokens\":%zu}",
                   (long long)api->created, api->dim, api->max_tokens);
    return srv_buf_take(&b);
}

/* The store's size and freshness: opened read-only for the call (a store indexed while serving is
 * seen at once). The time is the newest modification of the file or its write-ahead log. */
static void tb_store(srv_buf *b, const char *db) {
    if (!db) {
        srv_buf_put(b, "null", 4);
        return;
    }
    modattn_store *s = NULL;
    modattn_store_counts c;
    memset(&c, 0, sizeof c);
    int64_t srows = 0, schunks = 0;
    modattn__sparse_ident *sid = calloc(1, sizeof *sid); /* 4 KiB of folder: not on a handler's stack */
    bool have_sparse = false;
    int st = sid ? modattn_store_open(db, MODATTN_STORE_READONLY, &s) : MODATTN_ENOMEM;
    if (!st) st = modattn_store_get_counts(s, &c);
    if (!st) st = modattn__store_sparse_get(s, sid, &have_sparse);
    if (!st) st = modattn__store_sparse_count(s, &srows, &schunks);
    modattn_store_close(s);
    if (st) {
        free(sid);
        srv_buf_put(b, "{\"available\":false,\"error\":", 27);
        const char *m = modattn_last_error();
        tb_json_string(b, m && *m ? m : modattn_strerror(st));
        srv_buf_put(b, "}", 1);
        return;
    }
    time_t newest = 0;
    struct stat sb;
    char wal[4200];
    if (stat(db, &sb) == 0) newest = sb.st_mtime;
    snprintf(wal, sizeof wal, "%s-wal", db);
    if (stat(wal, &sb) == 0 && sb.st_mtime > newest) newest = sb.st_mtime;
    char when[32] = "";
    struct tm tm;
    if (newest && gmtime_r(&newest, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    srv_buf_printf(b, "{\"available\":true,\"documents\":%lld,\"chunks\":%lld,\"embeddings\":%lld,\"modified\":",
                   (long long)c.documents, (long long)c.chunks, (long long)c.embeddings);
    if (when[0]) srv_buf_printf(b, "\"%s\"", when);
    else srv_buf_put(b, "null", 4);
    /* its SPLADE vectors (`index --sparse DIR`): rows, chunks that have them, the model's name */
    srv_buf_printf(b, ",\"sparse_rows\":%lld,\"sparse_chunks\":%lld,\"sparse_model\":", (long long)srows,
                   (long long)schunks);
    if (have_sparse) tb_json_string(b, sid->name);
    else srv_buf_put(b, "null", 4);
    free(sid);
    srv_buf_put(b, "}", 1);
}

char *srv_info_body(const srv_api *api) {
    srv_buf b = {0};
    srv_buf_put(&b, "{\"model_id\":", 12);
    tb_json_string(&b, api->model_id);
    srv_buf_printf(&b, ",\"model_sha\":null,\"model_dtype\":\"%s\",\"model_type\":{\"embedding\":{\"pooling\":",
                   api->precision ? api->precision : "float32");
    tb_json_string(&b, api->pooling);
    srv_buf_printf(&b, "}},\"max_concurrent_requests\":%zu,\"max_input_length\":%zu,\"max_batch_tokens\":%zu,"
                       "\"max_batch_requests\":null,\"max_client_batch_size\":%zu,\"auto_truncate\":%s,"
                       "\"tokenization_workers\":null,\"version\":\"%s\",\"sha\":null,\"docker_label\":null,",
                   api->max_concurrent, api->max_tokens, api->max_batch_tokens, api->max_inputs,
                   api->truncate ? "true" : "false", modattn_version());
    srv_buf_printf(&b, "\"dimension\":%zu,\"pooling\":", api->dim);
    tb_json_string(&b, api->pooling);
    srv_buf_printf(&b, ",\"precision\":\"%s\",\"device\":", api->precision ? api->precision : "fp32");
    tb_json_string(&b, api->device);
    srv_buf_printf(&b, ",\"identity\":\"%s\",\"vocab_size\":%zu,\"max_body\":%zu,\"store\":",
                   api->identity ? api->identity : "", api->vocab, api->max_body);
    tb_store(&b, api->db);
    srv_buf_put(&b, "}", 1);
    return srv_buf_take(&b);
}

/* ---- POST /tokenize, POST /detokenize (text-embeddings-inference's bodies) */

/* An optional boolean field (absent or null: dflt). */
static int get_flag(json_t *root, const char *name, bool dflt, bool *out, srv_bad *bad) {
    json_t *v = json_object_get(root, name);
    *out = dflt;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return srv_bad_req(bad, 400, name, "invalid_type", "'%s' must be a boolean, not %s", name, json_kind(v));
    *out = json_is_true(v);
    return 0;
}

/* 'inputs'/'ids' as a list of items: a single item (is_item) is a list of one. */
static int get_list(const srv_api *api, json_t *root, const char *name, bool (*is_item)(const json_t *), const char *what,
                    json_t **items, bool *single, srv_bad *bad) {
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) return srv_bad_req(bad, 400, name, "missing_field", "'%s' is required: %s", name, what);
    *single = is_item(v);
    if (*single) {
        *items = json_pack("[O]", v);
        return *items ? 0 : srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
    }
    if (!json_is_array(v)) return srv_bad_req(bad, 400, name, "invalid_type", "'%s' must be %s, not %s", name, what, json_kind(v));
    size_t n = json_array_size(v);
    if (n == 0) return srv_bad_req(bad, 400, name, "invalid_value", "'%s' must not be an empty list", name);
    if (n > api->max_inputs)
        return srv_bad_req(bad, 413, name, "too_many_inputs", "'%s' has %zu items; this server takes at most %zu (--max-inputs)",
                       name, n, api->max_inputs);
    for (size_t i = 0; i < n; i++)
        if (!is_item(json_array_get(v, i)))
            return srv_bad_req(bad, 400, name, "invalid_type", "%s[%zu] must be %s, not %s", name, i,
                           strcmp(name, "ids") == 0 ? "a list of token ids" : "a string", json_kind(json_array_get(v, i)));
    *items = json_incref(v);
    return 0;
}

static bool is_text(const json_t *v) { return json_is_string(v); }

static bool is_id_list(const json_t *v) {
    if (!json_is_array(v) || json_array_size(v) == 0) return false;
    long long x;
    return get_int(json_array_get(v, 0), &x);
}

static bool is_special(const srv_api *api, const struct modattn_tokenizer *tok, int32_t id) {
    if (id == api->cls_id || id == api->sep_id || id == modattn_tokenizer_pad_id(tok) || id == modattn_tokenizer_unk_id(tok))
        return true;
    return id == modattn_tokenizer_find(tok, "[MASK]", 6);
}

char *srv_tokenize_body(const srv_api *api, const char *body, size_t len, srv_bad *bad) {
    json_t *root = parse_body(body, len, bad), *items = NULL;
    if (!root) return NULL;
    char *out = NULL;
    int32_t *ids = NULL;
    modattn_token_offset *offs = NULL;
    bool add_special = true, single = false;
    if (get_flag(root, "add_special_tokens", true, &add_special, bad) ||
        get_list(api, root, "inputs", is_text, "a string or a list of strings", &items, &single, bad))
        goto done;
    const struct modattn_tokenizer *tok = modattn_model_tokenizer(api->model);
    srv_buf b = {0};
    srv_buf_put(&b, "[", 1);
    for (size_t i = 0; i < json_array_size(items) && !b.failed; i++) {
        json_t *t = json_array_get(items, i);
        const char *text = json_string_value(t);
        const size_t tl = json_string_length(t);
        /* a word piece covers at least one byte: len + the specials bounds the count */
        const size_t cap = tl + 2;
        modattn_free(ids);
        modattn_free(offs);
        ids = modattn__malloc(cap * sizeof *ids, MODATTN_MEM_OTHER);
        offs = modattn__malloc(cap * sizeof *offs, MODATTN_MEM_OTHER);
        if (!ids || !offs) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory tokenizing inputs[%zu]", i);
            free(srv_buf_take(&b));
            goto done;
        }
        size_t n = 0;
        int st = modattn_tokenize_ex(tok, text, tl, add_special ? 0u : MODATTN_TOKENIZE_NO_SPECIALS, ids, offs, cap, &n);
        if (st) {
            if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory tokenizing inputs[%zu]", i);
            else srv_bad_req(bad, 400, "inputs", "invalid_value", "inputs[%zu]: %s", i, modattn_last_error());
            free(srv_buf_take(&b));
            goto done;
        }
        srv_buf_put(&b, i ? ",[" : "[", i ? 2 : 1);
        for (size_t k = 0; k < n && !b.failed; k++) {
            const bool sp = add_special && (k == 0 || k == n - 1) && offs[k].start == 0 && offs[k].end == 0 &&
                            is_special(api, tok, ids[k]);
            const char *piece = modattn_tokenizer_token(tok, ids[k]);
            srv_buf_printf(&b, "%s{\"id\":%d,\"text\":", k ? "," : "", ids[k]);
            if (sp || offs[k].end > tl || offs[k].start >= offs[k].end) {
                tb_json_string(&b, piece ? piece : "");
            } else {
                /* the text's bytes the piece came from (a JSON string: ill-formed UTF-8 as U+FFFD) */
                char *cut = modattn__strndup(text + offs[k].start, offs[k].end - offs[k].start, MODATTN_MEM_OTHER);
                if (!cut) b.failed = true;
                else if (memchr(cut, '\0', offs[k].end - offs[k].start)) tb_json_string(&b, piece ? piece : "");
                else tb_json_string(&b, cut);
                modattn_free(cut);
            }
            if (sp) srv_buf_printf(&b, ",\"special\":true,\"start\":null,\"stop\":null}");
            else srv_buf_printf(&b, ",\"special\":false,\"start\":%zu,\"stop\":%zu}", offs[k].start, offs[k].end);
        }
        srv_buf_put(&b, "]", 1);
    }
    srv_buf_put(&b, "]", 1);
    out = srv_buf_take(&b);
    if (!out) srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
done:
    modattn_free(ids);
    modattn_free(offs);
    json_decref(items);
    json_decref(root);
    modattn__json_take_failure();
    return out;
}

char *srv_detokenize_body(const srv_api *api, const char *body, size_t len, srv_bad *bad) {
    json_t *root = parse_body(body, len, bad), *items = NULL;
    if (!root) return NULL;
    char *out = NULL;
    int32_t *ids = NULL;
    bool skip = true, single = false;
    if (get_flag(root, "skip_special_tokens", true, &skip, bad)) goto done;
    json_t *v = json_object_get(root, "ids");
    if (v && json_is_array(v) && json_array_size(v) > 0 && !json_is_array(json_array_get(v, 0))) {
        single = true; /* one list of ids */
        items = json_pack("[O]", v);
        if (!items) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
            goto done;
        }
    } else if (get_list(api, root, "ids", is_id_list, "a list of token ids or a list of such lists", &items, &single, bad))
        goto done;
    const struct modattn_tokenizer *tok = modattn_model_tokenizer(api->model);
    srv_buf b = {0};
    srv_buf_put(&b, "[", 1);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *list = json_array_get(items, i);
        const size_t n = json_array_size(list);
        modattn_free(ids);
        ids = modattn__malloc((n ? n : 1) * sizeof *ids, MODATTN_MEM_OTHER);
        if (!ids) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
            goto fail;
        }
        for (size_t k = 0; k < n; k++) {
            long long id = 0;
            json_t *x = json_array_get(list, k);
            char param[48];
            if (single) snprintf(param, sizeof param, "ids[%zu]", k);
            else snprintf(param, sizeof param, "ids[%zu][%zu]", i, k);
            if (!get_int(x, &id)) {
                srv_bad_req(bad, 400, "ids", "invalid_type", "%s: a token id must be an integer, not %s", param, json_kind(x));
                goto fail;
            }
            if (id < 0 || id >= (long long)api->vocab) {
                srv_bad_req(bad, 400, "ids", "invalid_value", "%s: token id %lld is outside the vocabulary [0, %zu)", param,
                        id, api->vocab);
                goto fail;
            }
            ids[k] = (int32_t)id;
        }
        char *text = NULL;
        const int st = modattn_tokenizer_decode(tok, ids, n, skip ? 0u : MODATTN_DECODE_KEEP_SPECIALS, &text, NULL);
        if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) {
            srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory decoding ids");
            goto fail;
        } else if (st) {
            srv_bad_req(bad, st == MODATTN_EUNSUPPORTED ? 501 : 400, "ids", st == MODATTN_EUNSUPPORTED ? "not_implemented" : "invalid_value",
                        "%s", modattn_last_error());
            goto fail;
        }
        if (i) srv_buf_put(&b, ",", 1);
        tb_json_string(&b, text);
        modattn_free(text);
    }
    srv_buf_put(&b, "]", 1);
    out = srv_buf_take(&b);
    if (!out) srv_bad_req(bad, 503, NULL, "out_of_memory", "the server is out of memory");
    goto done;
fail:
    free(srv_buf_take(&b));
done:
    modattn_free(ids);
    json_decref(items);
    json_decref(root);
    modattn__json_take_failure();
    return out;
}

json_t *srv_json_body(const char *body, size_t len, srv_bad *bad) { return parse_body(body, len, bad); }
