/* pipeline/fmt_epub.c — EPUB: META-INF/container.xml names the package (OPF); its spine gives the
 * reading order of the XHTML documents, each read by html.c's rules (the visible text, blocks on
 * their own lines). Marks: the spine position (chapter 1, 2, ...). Members other than XML/XHTML
 * (images, fonts, styles) are never inflated. */
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "modattn/core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"

static bool is(const xmlNode *n, const char *local) {
    return n->type == XML_ELEMENT_NODE && n->name && strcmp((const char *)n->name, local) == 0;
}

static const char *attr(const xmlNode *n, const char *local) {
    for (const xmlAttr *a = n->properties; a; a = a->next)
        if (a->name && strcmp((const char *)a->name, local) == 0 && a->children && a->children->content)
            return (const char *)a->children->content;
    return NULL;
}

static bool want_epub(const char *name, void *ud) {
    (void)ud;
    const char *dot = strrchr(name, '.');
    if (strcmp(name, "mimetype") == 0) return true;
    if (!dot) return false;
    static const char *const ext[] = {".xml", ".opf", ".xhtml", ".html", ".htm", ".xht", NULL};
    for (int i = 0; ext[i]; i++)
        if (strcasecmp(dot, ext[i]) == 0) return true;
    return false;
}

static xmlNode *find(xmlNode *n, const char *local) {
    xmlNode *root = n;
    while (n) {
        if (is(n, local)) return n;
        if (n->children && n->type == XML_ELEMENT_NODE) {
            n = n->children;
            continue;
        }
        while (n != root && !n->next) n = n->parent;
        if (n == root) return NULL;
        n = n->next;
    }
    return NULL;
}

/* dir + href, percent-decoded, fragment dropped, "." and ".." resolved; NULL if it escapes. */
static char *resolve(const char *dir, const char *href) {
    size_t n = strlen(dir) + strlen(href) + 1;
    char *raw = malloc(n), *out = malloc(n);
    if (!raw || !out) {
        free(raw);
        free(out);
        return NULL;
    }
    size_t k = 0;
    memcpy(raw, dir, strlen(dir));
    k = strlen(dir);
    for (const char *p = href; *p && *p != '#'; p++) {
        if (*p == '%' && p[1] && p[2]) {
            char hx[3] = {p[1], p[2], 0};
            char *e;
            long v = strtol(hx, &e, 16);
            if (*e == '\0' && v > 0) {
                raw[k++] = (char)v;
                p += 2;
                continue;
            }
        }
        raw[k++] = *p;
    }
    raw[k] = '\0';
    size_t o = 0;
    for (char *seg = raw; *seg;) {
        char *e = strchr(seg, '/');
        size_t l = e ? (size_t)(e - seg) : strlen(seg);
        if (l == 0 || (l == 1 && seg[0] == '.')) {
        } else if (l == 2 && seg[0] == '.' && seg[1] == '.') {
            if (o == 0) {
                free(raw);
                free(out);
                return NULL;
            }
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--; /* the slash */
        } else {
            if (o) out[o++] = '/';
            memcpy(out + o, seg, l);
            o += l;
        }
        seg += l;
        if (*seg == '/') seg++;
    }
    out[o] = '\0';
    free(raw);
    return out;
}

int modattn__extract_epub(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    modattn__zip z;
    int st = modattn__zip_load(buf, len, cap, "EPUB", want_epub, NULL, &z);
    if (st) return st;
    const modattn__zmember *c = modattn__zip_get(&z, "META-INF/container.xml");
    if (!c) {
        modattn__zip_free(&z);
        return modattn__error(MODATTN_EFORMAT, "not an EPUB: the zip has no META-INF/container.xml");
    }
    xmlDocPtr cdoc = NULL, odoc = NULL;
    char *opf_name = NULL;
    modattn__textw w;
    memset(&w, 0, sizeof w);
    if ((st = modattn__xml_parse(c->data, c->len, "EPUB container.xml", &cdoc))) goto done;
    xmlNode *rf = find(xmlDocGetRootElement(cdoc), "rootfile");
    const char *fp = rf ? attr(rf, "full-path") : NULL;
    if (!fp || !(opf_name = resolve("", fp))) {
        st = modattn__error(MODATTN_EFORMAT, "EPUB: container.xml names no package (rootfile full-path)");
        goto done;
    }
    const modattn__zmember *opf = modattn__zip_get(&z, opf_name);
    if (!opf) {
        st = modattn__error(MODATTN_EFORMAT, "EPUB: its package %.200s is missing", opf_name);
        goto done;
    }
    if ((st = modattn__xml_parse(opf->data, opf->len, "EPUB package", &odoc))) goto done;
    char dir[1024] = "";
    const char *slash = strrchr(opf_name, '/');
    if (slash && (size_t)(slash - opf_name + 1) < sizeof dir) {
        memcpy(dir, opf_name, (size_t)(slash - opf_name + 1));
        dir[slash - opf_name + 1] = '\0';
    }
    xmlNode *root = xmlDocGetRootElement(odoc);
    xmlNode *manifest = find(root, "manifest"), *spine = find(root, "spine");
    if (!manifest || !spine) {
        st = modattn__error(MODATTN_EFORMAT, "EPUB: its package has no manifest or no spine");
        goto done;
    }
    int64_t chapter = 0;
    for (xmlNode *ir = spine->children; ir && !st && !w.b.err; ir = ir->next) {
        if (!is(ir, "itemref")) continue;
        const char *idref = attr(ir, "idref");
        const char *href = NULL;
        for (xmlNode *it = manifest->children; it && idref; it = it->next) {
            const char *id = is(it, "item") ? attr(it, "id") : NULL;
            if (id && strcmp(id, idref) == 0) {
                href = attr(it, "href");
                break;
            }
        }
        if (!href) continue;
        char *name = resolve(dir, href);
        const modattn__zmember *doc = name ? modattn__zip_get(&z, name) : NULL;
        free(name);
        if (!doc) continue;
        chapter++;
        modattn__textw_sep(&w, 3);
        modattn__textw_mark(&w, chapter);
        st = modattn__textw_html(&w, doc->data, doc->len);
    }
done:
    if (cdoc) xmlFreeDoc(cdoc);
    if (odoc) xmlFreeDoc(odoc);
    free(opf_name);
    modattn__zip_free(&z);
    if (st) {
        modattn__tbuf_free(&w.b);
        return st;
    }
    return modattn__tbuf_finish(&w.b, out, false);
}
