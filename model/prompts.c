/* model/prompts.c — prompts and Matryoshka dimensions as sentence-transformers applies them:
 * config_sentence_transformers.json's "prompts", "default_prompt_name" and "truncate_dim", the
 * Pooling config's "include_prompt", the choice of a prompt (encode / encode_query /
 * encode_document), and the cut of a vector to its first N components (re-normalised when the
 * model normalises). modattn_model_embed_opt prepends the prompt to each text and embeds. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "model/encoder_internal.h"
#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#define PROMPTS_MAX 256               /* prompts a model may name */
#define PROMPT_MAX_BYTES ((size_t)1 << 16) /* one prompt's text */

static const char k_st_config[] = "config_sentence_transformers.json";

/* A JSON file of the model folder, or *out NULL when it is missing. */
static int load_optional(const char *dir, const char *name, char *path, size_t plen, json_t **out) {
    *out = NULL;
    int st = modattn__path_join(path, plen, dir, name);
    if (st) return st;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        return modattn__error(MODATTN_EIO, "%s: %s", path, strerror(errno));
    }
    json_error_t err;
    st = modattn__json_load_file(path, JSON_REJECT_DUPLICATES, out, &err);
    if (st == MODATTN_EFORMAT)
        return modattn__error(MODATTN_EFORMAT, "%s: not valid JSON: %s (line %d, column %d)", path, err.text, err.line,
                             err.column);
    if (st) return modattn__error_prefix(st, "reading %s", path);
    return 0;
}

void modattn__prompts_free(modattn__prompts *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        if (p->names) modattn_free(p->names[i]);
        if (p->texts) modattn_free(p->texts[i]);
    }
    modattn_free(p->names);
    modattn_free(p->texts);
    modattn_free(p->default_name);
    memset(p, 0, sizeof *p);
}

/* sentence-transformers (6.x) starts every model's prompts with "query" and "document", empty
 * unless the file sets them: so those names always resolve (to no prompt), and encode_document
 * picks "document" before "passage" or "corpus" whenever it is there, that is always. */
static int placeholders(modattn__prompts *p, size_t cap) {
    p->names = modattn__calloc(cap, sizeof *p->names, MODATTN_MEM_OTHER);
    p->texts = modattn__calloc(cap, sizeof *p->texts, MODATTN_MEM_OTHER);
    if (!p->names || !p->texts) return modattn__mem_last_status();
    static const char *const k_names[2] = {"query", "document"};
    for (size_t i = 0; i < 2; i++) {
        p->names[i] = modattn__strdup(k_names[i], MODATTN_MEM_OTHER);
        p->texts[i] = modattn__strdup("", MODATTN_MEM_OTHER);
        p->n++;
        if (!p->names[i] || !p->texts[i]) return modattn__mem_last_status();
    }
    return 0;
}

static int read_st_config(const char *dir, size_t dim, modattn__prompts *p) {
    char F[MODATTN__PATH_MAX];
    json_t *j = NULL;
    int st = load_optional(dir, k_st_config, F, sizeof F, &j);
    if (st) return st;
    if (!j) return placeholders(p, 2);
    if (!json_is_object(j)) {
        st = modattn__error(MODATTN_EFORMAT, "%s: not a JSON object", F);
        goto out;
    }
    const json_t *pr = json_object_get(j, "prompts");
    if (pr && !json_is_null(pr)) {
        if (!json_is_object(pr)) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"prompts\" must be an object of name: text", F);
            goto out;
        }
        size_t n = json_object_size(pr);
        if (n > PROMPTS_MAX) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"prompts\" has %zu prompts (at most %d)", F, n,
                               PROMPTS_MAX);
            goto out;
        }
        if ((st = placeholders(p, n + 2))) goto out;
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)pr, key, v) {
            /* sentence-transformers reads a null prompt as "" */
            if (!json_is_string(v) && !json_is_null(v)) {
                st = modattn__error(MODATTN_EFORMAT, "%s: field \"prompts\".\"%.100s\" must be a string", F, key);
                goto out;
            }
            size_t len = json_is_string(v) ? json_string_length(v) : 0;
            if (len > PROMPT_MAX_BYTES || (len && memchr(json_string_value(v), '\0', len))) {
                st = modattn__error(MODATTN_EFORMAT, "%s: field \"prompts\".\"%.100s\" is %s", F, key,
                                   len > PROMPT_MAX_BYTES ? "longer than 64 KiB" : "a string with a NUL byte");
                goto out;
            }
            size_t at = p->n;
            for (size_t i = 0; i < 2; i++) /* a placeholder keeps its place, as in a Python dict */
                if (strcmp(key, p->names[i]) == 0) at = i;
            char *t = modattn__strndup(len ? json_string_value(v) : "", len, MODATTN_MEM_OTHER);
            if (!t) {
                st = modattn__mem_last_status();
                goto out;
            }
            if (at < p->n) {
                modattn_free(p->texts[at]);
                p->texts[at] = t;
                continue;
            }
            p->texts[p->n] = t;
            p->names[p->n++] = modattn__strdup(key, MODATTN_MEM_OTHER);
            if (!p->names[p->n - 1]) {
                st = modattn__mem_last_status();
                goto out;
            }
        }
    }
    if (!p->names && (st = placeholders(p, 2))) goto out;
    const json_t *dn = json_object_get(j, "default_prompt_name");
    if (dn && !json_is_null(dn)) {
        if (!json_is_string(dn)) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"default_prompt_name\" must be a string or null", F);
            goto out;
        }
        const char *name = json_string_value(dn);
        bool found = false;
        for (size_t i = 0; i < p->n && !found; i++) found = strcmp(p->names[i], name) == 0;
        if (!found) { /* sentence-transformers refuses it at load too */
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"default_prompt_name\" = \"%.100s\" is not one of "
                               "\"prompts\"", F, name);
            goto out;
        }
        if (!(p->default_name = modattn__strdup(name, MODATTN_MEM_OTHER))) {
            st = modattn__mem_last_status();
            goto out;
        }
    }
    const json_t *td = json_object_get(j, "truncate_dim");
    if (td && !json_is_null(td)) {
        if (!json_is_integer(td) || json_integer_value(td) < 1 || (size_t)json_integer_value(td) > dim) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"truncate_dim\" must be an integer in [1, %zu] (the "
                               "model's dimension) or null", F, dim);
            goto out;
        }
        p->truncate_dim = (size_t)json_integer_value(td);
    }
out:
    json_decref(j);
    return st;
}

/* modules.json's second module (the Pooling; config.c has checked the list): its include_prompt */
static int read_include_prompt(const char *dir, modattn__prompts *p) {
    char F[MODATTN__PATH_MAX], pdir[MODATTN__PATH_MAX];
    json_t *j = NULL, *pc = NULL;
    int st = load_optional(dir, "modules.json", F, sizeof F, &j);
    if (st || !j) return st;
    const json_t *m = json_array_get(j, 1);
    const json_t *path = m ? json_object_get(m, "path") : NULL;
    if (!json_is_string(path)) goto out; /* config.c names what is wrong */
    if ((st = modattn__path_join(pdir, sizeof pdir, dir, json_string_value(path)))) goto out;
    if ((st = load_optional(pdir, "config.json", F, sizeof F, &pc)) || !pc) goto out;
    const json_t *ip = json_object_get(pc, "include_prompt");
    if (ip && !json_is_boolean(ip)) {
        st = modattn__error(MODATTN_EFORMAT, "%s: field \"include_prompt\" must be a boolean", F);
        goto out;
    }
    p->exclude_prompt = ip && json_is_false(ip);
out:
    json_decref(pc);
    json_decref(j);
    return st;
}

int modattn__prompts_load(const char *dir, size_t dim, modattn__prompts *p) {
    memset(p, 0, sizeof *p);
    int st = read_st_config(dir, dim, p);
    if (!st) st = read_include_prompt(dir, p);
    if (st) modattn__prompts_free(p);
    return st;
}

/* ------------------------------------------------------------------ the public calls */

size_t modattn_model_prompt_count(const modattn_model *m) { return m ? m->prompts.n : 0; }

int modattn_model_prompt_at(const modattn_model *m, size_t i, const char **name, const char **text) {
    if (!m || i >= m->prompts.n) return MODATTN_ERANGE;
    if (name) *name = m->prompts.names[i];
    if (text) *text = m->prompts.texts[i];
    return 0;
}

const char *modattn_model_default_prompt_name(const modattn_model *m) { return m ? m->prompts.default_name : NULL; }

static const char *find(const modattn__prompts *p, const char *name) {
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->names[i], name) == 0) return p->texts[i];
    return NULL;
}

int modattn_model_resolve_prompt(const modattn_model *m, const modattn_embed_options *o, const char **text,
                                 const char **name) {
    if (!m || !text) return modattn__error(MODATTN_EINVAL, "modattn_model_resolve_prompt: NULL argument");
    const modattn__prompts *p = &m->prompts;
    const char *t = NULL, *nm = NULL;
    if (o && o->prompt) {
        t = o->prompt;
    } else if (o && o->prompt_name) {
        if (!(t = find(p, o->prompt_name))) {
            char list[512];
            size_t k = 0;
            list[0] = '\0';
            for (size_t i = 0; i < p->n && k + 8 < sizeof list; i++) {
                int w = snprintf(list + k, sizeof list - k, "%s\"%s\"", i ? ", " : "", p->names[i]);
                if (w < 0) break;
                k += (size_t)w < sizeof list - k ? (size_t)w : sizeof list - k - 1;
            }
            return modattn__error(MODATTN_ENOTFOUND, "model %s has no prompt named \"%.100s\" (%s%s)", m->name,
                                 o->prompt_name, p->n ? "its prompts: " : "it defines no prompts in ",
                                 p->n ? list : k_st_config);
        }
        nm = o->prompt_name;
    } else {
        static const char *const k_doc[] = {"document", "passage", "corpus"};
        modattn_embed_task task = o ? o->task : MODATTN_EMBED_PLAIN;
        if (task == MODATTN_EMBED_QUERY && find(p, "query")) nm = "query";
        for (size_t i = 0; task == MODATTN_EMBED_DOCUMENT && !nm && i < 3; i++)
            if (find(p, k_doc[i])) nm = k_doc[i];
        if (!nm) nm = p->default_name;
        if (nm) t = find(p, nm);
    }
    if (t && !*t) t = NULL, nm = NULL; /* an empty prompt is none */
    *text = t;
    if (name) *name = t ? nm : NULL;
    return 0;
}

size_t modattn_model_embed_dim(const modattn_model *m, const modattn_embed_options *o) {
    if (!m) return 0;
    size_t full = m->cfg.dim, d = o && o->dimensions ? o->dimensions : m->prompts.truncate_dim;
    if (!d) return full;
    if (d > full) {
        modattn__error(MODATTN_EINVAL, "dimensions %zu: model %s gives %zu (use 1 to %zu)", d, m->name, full, full);
        return 0;
    }
    return d;
}

void modattn_model_cut_dims(const modattn_model *m, float *v, size_t n, size_t dims) {
    const size_t full = m->cfg.dim;
    if (dims == 0 || dims > full) return;
    for (size_t i = 0; i < n; i++) {
        float *dst = v + i * dims;
        memmove(dst, v + i * full, dims * sizeof *v);
        if (!m->cfg.normalize || dims == full) continue;
        /* torch.nn.functional.normalize: x / max(||x||, 1e-12) */
        double ss = 0;
        for (size_t k = 0; k < dims; k++) ss += (double)dst[k] * dst[k];
        float nrm = (float)sqrt(ss);
        if (nrm < 1e-12f) nrm = 1e-12f;
        for (size_t k = 0; k < dims; k++) dst[k] /= nrm;
    }
}

int modattn_model_embed_opt(modattn_model *m, modattn_session *s, const modattn_embed_options *o,
                            const char *const *texts, const size_t *lens, size_t n, float *out, int32_t *ntok) {
    if (!m) return modattn__error(MODATTN_EINVAL, "modattn_model_embed_opt: model is NULL");
    const char *prompt = NULL;
    int st = modattn_model_resolve_prompt(m, o, &prompt, NULL);
    if (st) return st;
    const size_t dims = modattn_model_embed_dim(m, o), full = m->cfg.dim;
    if (!dims) return MODATTN_EINVAL;
    if (n == 0) return 0;
    if (!texts || !out) return modattn__error(MODATTN_EINVAL, "modattn_model_embed_opt: NULL argument");
    if (prompt && m->prompts.exclude_prompt)
        return modattn__error(MODATTN_EUNSUPPORTED, "model %s: its Pooling config says \"include_prompt\": false "
                             "(pooling that leaves out the prompt's tokens), which is not supported: embed "
                             "without a prompt (--prompt '')", m->name);
    char **pt = NULL;
    size_t *pl = NULL;
    float *tmp = NULL;
    if (prompt) {
        const size_t plen = strlen(prompt);
        pt = modattn__calloc(n, sizeof *pt, MODATTN_MEM_OTHER);
        pl = modattn__calloc(n, sizeof *pl, MODATTN_MEM_OTHER);
        if (!pt || !pl) {
            st = modattn__mem_last_status();
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            if (!texts[i] && lens && lens[i]) {
                st = modattn__error(MODATTN_EINVAL, "input %zu: NULL text of %zu bytes", i, lens[i]);
                goto done;
            }
            const char *t = texts[i] ? texts[i] : "";
            const size_t tl = lens && texts[i] ? lens[i] : strlen(t);
            if (tl > SIZE_MAX - plen - 1) {
                st = modattn__error(MODATTN_ERANGE, "input %zu: too long", i);
                goto done;
            }
            if (!(pt[i] = modattn__malloc(plen + tl + 1, MODATTN_MEM_OTHER))) {
                st = modattn__mem_last_status();
                goto done;
            }
            memcpy(pt[i], prompt, plen);
            memcpy(pt[i] + plen, t, tl);
            pt[i][plen + tl] = '\0';
            pl[i] = plen + tl;
        }
    }
    float *dst = out;
    if (dims < full) {
        if (n > SIZE_MAX / sizeof(float) / full) {
            st = modattn__error(MODATTN_ERANGE, "modattn_model_embed_opt: n = %zu", n);
            goto done;
        }
        if (!(dst = tmp = modattn__malloc(n * full * sizeof(float), MODATTN_MEM_OTHER))) {
            st = modattn__mem_last_status();
            goto done;
        }
    }
    const char *const *tx = pt ? (const char *const *)pt : texts;
    const size_t *ln = pt ? pl : lens;
    st = s ? modattn_model_embed_with(m, s, tx, ln, n, dst, ntok) : modattn_model_embed(m, tx, ln, n, dst, ntok);
    if (!st && tmp) {
        modattn_model_cut_dims(m, tmp, n, dims);
        memcpy(out, tmp, n * dims * sizeof(float));
    }
done:
    if (pt)
        for (size_t i = 0; i < n; i++) modattn_free(pt[i]);
    modattn_free(pt);
    modattn_free(pl);
    modattn_free(tmp);
    return st;
}
