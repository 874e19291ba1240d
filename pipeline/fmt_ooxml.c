/* pipeline/fmt_ooxml.c — Office Open XML: .docx (word/document.xml, paragraphs in order; marks:
 * paragraph numbers), .pptx (slides in the order of ppt/presentation.xml; marks: slide numbers),
 * .xlsx (shared strings and every sheet's cells in the workbook's order, a row per line, cells
 * tab-separated; marks: sheet numbers). Zip through libarchive, XML through libxml2 (fmt_zip.c). */
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"

static bool is(const xmlNode *n, const char *local) {
    return n->type == XML_ELEMENT_NODE && n->name && strcmp((const char *)n->name, local) == 0;
}

/* Pre-order walk without recursion: next node after n inside root (skip: do not enter n). */
static xmlNode *walk_next(xmlNode *n, xmlNode *root, bool skip, void (*leave)(void *, xmlNode *), void *ud) {
    if (!skip && n->children && n->type == XML_ELEMENT_NODE) return n->children;
    if (leave && skip) leave(ud, n);
    while (n != root && !n->next) {
        n = n->parent;
        if (!n) return NULL;
        if (leave) leave(ud, n);
        if (n == root) return NULL;
    }
    if (n == root) return NULL;
    return n->next;
}

static const char *attr(const xmlNode *n, const char *local) {
    for (const xmlAttr *a = n->properties; a; a = a->next)
        if (a->name && strcmp((const char *)a->name, local) == 0 && a->children && a->children->content)
            return (const char *)a->children->content;
    return NULL;
}

/* The r:id of an element (a namespaced "id", not the plain numeric one sldId also has). */
static const char *rid(const xmlNode *n) {
    for (const xmlAttr *a = n->properties; a; a = a->next)
        if (a->ns && a->name && strcmp((const char *)a->name, "id") == 0 && a->children && a->children->content)
            return (const char *)a->children->content;
    return NULL;
}

/* ------------------------------------------------------------------ relationships */

typedef struct rel {
    char *id, *target;
} rel;

/* "_rels/x.xml.rels" of part "dir/x.xml": Id -> Target resolved against dir. */
static size_t load_rels(const modattn__zip *z, const char *rels_name, const char *dir, rel **out) {
    *out = NULL;
    const modattn__zmember *m = modattn__zip_get(z, rels_name);
    if (!m) return 0;
    xmlDocPtr doc;
    if (modattn__xml_parse(m->data, m->len, "relationships", &doc)) return 0;
    size_t n = 0, cap = 0;
    rel *r = NULL;
    xmlNode *root = xmlDocGetRootElement(doc);
    for (xmlNode *c = root ? root->children : NULL; c; c = c->next) {
        if (!is(c, "Relationship")) continue;
        const char *id = attr(c, "Id"), *t = attr(c, "Target");
        if (!id || !t) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            rel *nr = realloc(r, cap * sizeof *nr);
            if (!nr) break;
            r = nr;
        }
        size_t need = strlen(dir) + strlen(t) + 2;
        r[n].id = strdup(id);
        r[n].target = malloc(need);
        if (!r[n].id || !r[n].target) {
            free(r[n].id);
            free(r[n].target);
            break;
        }
        if (t[0] == '/') snprintf(r[n].target, need, "%s", t + 1);
        else snprintf(r[n].target, need, "%s%s", dir, t);
        n++;
    }
    xmlFreeDoc(doc);
    *out = r;
    return n;
}

static void free_rels(rel *r, size_t n) {
    for (size_t i = 0; i < n; i++) free(r[i].id), free(r[i].target);
    free(r);
}

static const char *rel_target(const rel *r, size_t n, const char *id) {
    for (size_t i = 0; id && i < n; i++)
        if (strcmp(r[i].id, id) == 0) return r[i].target;
    return NULL;
}

/* Parts in the order the main part lists them (elements `item_el` with an r:id attribute),
 * falling back on the number in their names ("slide10.xml" after "slide9.xml"). */
typedef struct part_list {
    const modattn__zmember **p;
    size_t n;
} part_list;

static int num_in(const char *name) {
    const char *s = strrchr(name, '/');
    s = s ? s + 1 : name;
    while (*s && (*s < '0' || *s > '9')) s++;
    return atoi(s);
}
static int by_num(const void *a, const void *b) {
    const modattn__zmember *x = *(const modattn__zmember *const *)a, *y = *(const modattn__zmember *const *)b;
    int i = num_in(x->name), j = num_in(y->name);
    return i < j ? -1 : i > j;
}

static int ordered_parts(const modattn__zip *z, const char *main_part, const char *main_rels, const char *dir,
                         const char *item_el, const char *prefix, part_list *out) {
    out->p = calloc(z->n + 1, sizeof *out->p);
    out->n = 0;
    if (!out->p) return modattn__error(MODATTN_ENOMEM, "out of memory");
    const modattn__zmember *mp = modattn__zip_get(z, main_part);
    rel *r = NULL;
    size_t nr = load_rels(z, main_rels, dir, &r);
    if (mp && nr) {
        xmlDocPtr doc;
        if (modattn__xml_parse(mp->data, mp->len, main_part, &doc) == 0) {
            xmlNode *root = xmlDocGetRootElement(doc);
            for (xmlNode *n = root; n; n = walk_next(n, root, false, NULL, NULL)) {
                if (!is(n, item_el)) continue;
                const char *t = rel_target(r, nr, rid(n));
                const modattn__zmember *m = t ? modattn__zip_get(z, t) : NULL;
                bool dup = false;
                for (size_t i = 0; m && i < out->n; i++) dup |= out->p[i] == m;
                if (m && !dup && out->n < z->n) out->p[out->n++] = m;
            }
            xmlFreeDoc(doc);
        }
    }
    free_rels(r, nr);
    if (out->n == 0) { /* no usable list: by number */
        size_t pl = strlen(prefix);
        for (size_t i = 0; i < z->n; i++) {
            const char *nm = z->m[i].name;
            size_t l = strlen(nm);
            if (strncmp(nm, prefix, pl) == 0 && !strchr(nm + pl, '/') && l > 4 && strcmp(nm + l - 4, ".xml") == 0)
                out->p[out->n++] = &z->m[i];
        }
        qsort(out->p, out->n, sizeof *out->p, by_num);
    }
    return 0;
}

/* ------------------------------------------------------------------ docx */

static bool want_docx(const char *name, void *ud) {
    (void)ud;
    return strcmp(name, "word/document.xml") == 0 || strcmp(name, "[Content_Types].xml") == 0;
}

int modattn__extract_docx(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    modattn__zip z;
    int st = modattn__zip_load(buf, len, cap, "DOCX", want_docx, NULL, &z);
    if (st) return st;
    const modattn__zmember *m = modattn__zip_get(&z, "word/document.xml");
    if (!m) {
        modattn__zip_free(&z);
        return modattn__error(MODATTN_EFORMAT, "not a DOCX: the zip has no word/document.xml");
    }
    xmlDocPtr doc;
    if ((st = modattn__xml_parse(m->data, m->len, "DOCX word/document.xml", &doc))) {
        modattn__zip_free(&z);
        return st;
    }
    modattn__textw w;
    memset(&w, 0, sizeof w);
    int64_t para = 0;
    xmlNode *root = xmlDocGetRootElement(doc);
    for (xmlNode *n = root; n && !w.b.err;) {
        bool skip = false;
        if (is(n, "p")) {
            modattn__textw_sep(&w, 2);
            para++;
        } else if (is(n, "t")) {
            xmlChar *s = xmlNodeGetContent(n);
            if (s && *s) {
                modattn__textw_mark(&w, para);
                modattn__textw_put(&w, (const char *)s, strlen((const char *)s));
            }
            xmlFree(s);
            skip = true;
        } else if (is(n, "tab")) {
            modattn__textw_sep(&w, 1);
        } else if (is(n, "br") || is(n, "cr")) {
            modattn__textw_sep(&w, 2);
        } else if (is(n, "instrText") || is(n, "delText") || is(n, "del")) {
            skip = true; /* field codes and deleted text are not what the reader sees */
        }
        n = walk_next(n, root, skip, NULL, NULL);
    }
    xmlFreeDoc(doc);
    modattn__zip_free(&z);
    return modattn__tbuf_finish(&w.b, out, false);
}

/* ------------------------------------------------------------------ pptx */

static bool want_pptx(const char *name, void *ud) {
    (void)ud;
    return strcmp(name, "ppt/presentation.xml") == 0 || strcmp(name, "ppt/_rels/presentation.xml.rels") == 0 ||
           (strncmp(name, "ppt/slides/slide", 16) == 0 && !strchr(name + 11, '/'));
}

int modattn__extract_pptx(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    modattn__zip z;
    int st = modattn__zip_load(buf, len, cap, "PPTX", want_pptx, NULL, &z);
    if (st) return st;
    part_list pl;
    if ((st = ordered_parts(&z, "ppt/presentation.xml", "ppt/_rels/presentation.xml.rels", "ppt/", "sldId",
                            "ppt/slides/slide", &pl))) {
        modattn__zip_free(&z);
        return st;
    }
    if (pl.n == 0 && !modattn__zip_get(&z, "ppt/presentation.xml")) {
        free(pl.p);
        modattn__zip_free(&z);
        return modattn__error(MODATTN_EFORMAT, "not a PPTX: the zip has no ppt/presentation.xml");
    }
    modattn__textw w;
    memset(&w, 0, sizeof w);
    for (size_t i = 0; i < pl.n && !st && !w.b.err; i++) {
        xmlDocPtr doc;
        if ((st = modattn__xml_parse(pl.p[i]->data, pl.p[i]->len, "PPTX slide", &doc))) break;
        modattn__textw_sep(&w, 3);
        xmlNode *root = xmlDocGetRootElement(doc);
        for (xmlNode *n = root; n && !w.b.err;) {
            bool skip = false;
            if (is(n, "p")) {
                modattn__textw_sep(&w, 2);
            } else if (is(n, "t")) {
                xmlChar *s = xmlNodeGetContent(n);
                if (s && *s) {
                    modattn__textw_mark(&w, (int64_t)i + 1);
                    modattn__textw_put(&w, (const char *)s, strlen((const char *)s));
                }
                xmlFree(s);
                skip = true;
            } else if (is(n, "br")) {
                modattn__textw_sep(&w, 2);
            }
            n = walk_next(n, root, skip, NULL, NULL);
        }
        xmlFreeDoc(doc);
    }
    free(pl.p);
    modattn__zip_free(&z);
    if (st) {
        modattn__tbuf_free(&w.b);
        return st;
    }
    return modattn__tbuf_finish(&w.b, out, false);
}

/* ------------------------------------------------------------------ xlsx */

static bool want_xlsx(const char *name, void *ud) {
    (void)ud;
    return strcmp(name, "xl/workbook.xml") == 0 || strcmp(name, "xl/_rels/workbook.xml.rels") == 0 ||
           strcmp(name, "xl/sharedStrings.xml") == 0 ||
           (strncmp(name, "xl/worksheets/sheet", 19) == 0 && !strchr(name + 14, '/'));
}

typedef struct sstr {
    char **s;
    size_t n, cap;
} sstr;

static int load_shared(const modattn__zip *z, sstr *t) {
    memset(t, 0, sizeof *t);
    const modattn__zmember *m = modattn__zip_get(z, "xl/sharedStrings.xml");
    if (!m) return 0;
    xmlDocPtr doc;
    int st = modattn__xml_parse(m->data, m->len, "XLSX xl/sharedStrings.xml", &doc);
    if (st) return st;
    xmlNode *root = xmlDocGetRootElement(doc);
    for (xmlNode *si = root ? root->children : NULL; si && !st; si = si->next) {
        if (!is(si, "si")) continue;
        /* the text of every t below si (rich runs), phonetic runs (rPh) left out */
        modattn__tbuf b;
        memset(&b, 0, sizeof b);
        for (xmlNode *n = si->children ? si : NULL; n;) {
            bool skip = false;
            if (n != si && is(n, "rPh")) skip = true;
            else if (is(n, "t")) {
                xmlChar *s = xmlNodeGetContent(n);
                if (s) modattn__tbuf_put(&b, (const char *)s, strlen((const char *)s));
                xmlFree(s);
                skip = true;
            }
            n = walk_next(n, si, skip, NULL, NULL);
        }
        modattn__tbuf_put(&b, "", 0);
        if (t->n == t->cap) {
            size_t nc = t->cap ? t->cap * 2 : 64;
            char **ns = realloc(t->s, nc * sizeof *ns);
            if (!ns) {
                st = modattn__error(MODATTN_ENOMEM, "out of memory");
                modattn__tbuf_free(&b);
                break;
            }
            t->s = ns;
            t->cap = nc;
        }
        char *copy = malloc(b.n + 1);
        if (copy) {
            if (b.n) memcpy(copy, b.p, b.n);
            copy[b.n] = '\0';
        }
        modattn__tbuf_free(&b);
        t->s[t->n++] = copy;
    }
    xmlFreeDoc(doc);
    return st;
}

static void free_shared(sstr *t) {
    for (size_t i = 0; i < t->n; i++) free(t->s[i]);
    free(t->s);
}

int modattn__extract_xlsx(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    modattn__zip z;
    int st = modattn__zip_load(buf, len, cap, "XLSX", want_xlsx, NULL, &z);
    if (st) return st;
    if (!modattn__zip_get(&z, "xl/workbook.xml")) {
        modattn__zip_free(&z);
        return modattn__error(MODATTN_EFORMAT, "not an XLSX: the zip has no xl/workbook.xml");
    }
    sstr t;
    part_list pl = {0};
    if ((st = load_shared(&z, &t)) ||
        (st = ordered_parts(&z, "xl/workbook.xml", "xl/_rels/workbook.xml.rels", "xl/", "sheet",
                            "xl/worksheets/sheet", &pl))) {
        free_shared(&t);
        modattn__zip_free(&z);
        return st;
    }
    modattn__textw w;
    memset(&w, 0, sizeof w);
    for (size_t i = 0; i < pl.n && !st && !w.b.err; i++) {
        xmlDocPtr doc;
        if ((st = modattn__xml_parse(pl.p[i]->data, pl.p[i]->len, "XLSX sheet", &doc))) break;
        modattn__textw_sep(&w, 3);
        xmlNode *root = xmlDocGetRootElement(doc);
        for (xmlNode *n = root; n && !w.b.err;) {
            bool skip = false;
            if (is(n, "row")) {
                modattn__textw_sep(&w, 2);
            } else if (is(n, "c")) {
                const char *type = attr(n, "t");
                const char *val = NULL;
                xmlChar *owned = NULL;
                for (xmlNode *c = n->children; c; c = c->next) {
                    if (type && strcmp(type, "inlineStr") == 0 && is(c, "is")) owned = xmlNodeGetContent(c);
                    else if (is(c, "v")) owned = xmlNodeGetContent(c);
                    if (owned) break;
                }
                if (owned) {
                    val = (const char *)owned;
                    if (type && strcmp(type, "s") == 0) {
                        char *e;
                        long k = strtol(val, &e, 10);
                        val = (e != val && k >= 0 && (size_t)k < t.n && t.s[k]) ? t.s[k] : "";
                    }
                }
                if (val && *val) {
                    /* cells of a row: tab-separated */
                    if (w.pending == 1 || (w.pending == 0 && w.b.n && w.b.p[w.b.n - 1] != '\n')) {
                        w.pending = 0;
                        modattn__tbuf_put(&w.b, "\t", 1);
                    }
                    modattn__textw_mark(&w, (int64_t)i + 1);
                    modattn__textw_put(&w, val, strlen(val));
                }
                xmlFree(owned);
                skip = true;
            }
            n = walk_next(n, root, skip, NULL, NULL);
        }
        xmlFreeDoc(doc);
    }
    free(pl.p);
    free_shared(&t);
    modattn__zip_free(&z);
    if (st) {
        modattn__tbuf_free(&w.b);
        return st;
    }
    return modattn__tbuf_finish(&w.b, out, false);
}
