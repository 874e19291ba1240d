/* pipeline/fmt_odf.c — OpenDocument (.odt, .odp, .ods): content.xml's text in document order.
 * Paragraphs and headings on their own lines (marks: paragraph numbers); a presentation's pages
 * (marks: slide numbers); a spreadsheet's tables (marks: sheet numbers), a row per line, cells
 * tab-separated. text:s, text:tab and text:line-break are the space, tab and break they stand
 * for. Zip through libarchive, XML through libxml2 (fmt_zip.c). */
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

static bool want_odf(const char *name, void *ud) {
    (void)ud;
    return strcmp(name, "content.xml") == 0 || strcmp(name, "mimetype") == 0;
}

int modattn__extract_odf(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    modattn__zip z;
    int st = modattn__zip_load(buf, len, cap, "OpenDocument file", want_odf, NULL, &z);
    if (st) return st;
    const modattn__zmember *m = modattn__zip_get(&z, "content.xml");
    if (!m) {
        modattn__zip_free(&z);
        return modattn__error(MODATTN_EFORMAT, "not an OpenDocument file: the zip has no content.xml");
    }
    xmlDocPtr doc;
    if ((st = modattn__xml_parse(m->data, m->len, "OpenDocument content.xml", &doc))) {
        modattn__zip_free(&z);
        return st;
    }
    modattn__textw w;
    memset(&w, 0, sizeof w);
    int64_t para = 0, page = 0, sheet = 0;
    bool cell_started = false;
    const modattn__zmember *mt = modattn__zip_get(&z, "mimetype");
    const bool spreadsheet = mt && strstr(mt->data, "spreadsheet");
    xmlNode *root = xmlDocGetRootElement(doc);
    for (xmlNode *n = root; n && !w.b.err;) {
        bool skip = false;
        if (n->type == XML_TEXT_NODE && n->content) {
            int64_t pos = sheet ? sheet : page ? page : para;
            size_t l = strlen((const char *)n->content);
            bool blank = true;
            for (size_t i = 0; i < l && blank; i++) blank = strchr(" \t\r\n", n->content[i]) != NULL;
            if (!blank) {
                if (cell_started) {
                    /* the first text of a cell after another cell of its row: a tab */
                    if (w.b.n && w.b.p[w.b.n - 1] != '\n' && w.pending <= 1) {
                        w.pending = 0;
                        modattn__tbuf_put(&w.b, "\t", 1);
                    }
                    cell_started = false;
                }
                modattn__textw_mark(&w, pos > 0 ? pos : 1);
            }
            modattn__textw_put(&w, (const char *)n->content, l);
        } else if (is(n, "p") || is(n, "h")) {
            if (!sheet) modattn__textw_sep(&w, 2);
            else if (!cell_started) modattn__textw_sep(&w, 1);
            para++;
        } else if (is(n, "s")) {
            modattn__textw_raw(&w, " ", 1);
        } else if (is(n, "tab")) {
            modattn__textw_raw(&w, "\t", 1);
        } else if (is(n, "line-break")) {
            modattn__textw_sep(&w, 2);
        } else if (is(n, "page")) {
            page++;
            modattn__textw_sep(&w, 3);
        } else if (is(n, "table") && n->ns && n->ns->href && strstr((const char *)n->ns->href, "table")) {
            /* a spreadsheet's tables are its sheets; a text document's tables are inside it */
            modattn__textw_sep(&w, 3);
            if (spreadsheet)
                sheet++;
        } else if (is(n, "table-row")) {
            modattn__textw_sep(&w, 2);
        } else if (is(n, "table-cell")) {
            cell_started = true;
        } else if (is(n, "annotation") || is(n, "forms") || is(n, "tracked-changes") || is(n, "sequence-decls")) {
            skip = true; /* comments, form definitions, deleted text, numbering set-up: not the text */
        }
        /* next node, pre-order */
        if (!skip && n->children && n->type == XML_ELEMENT_NODE) {
            n = n->children;
            continue;
        }
        while (n != root && !n->next) n = n->parent;
        if (n == root) break;
        n = n->next;
    }
    xmlFreeDoc(doc);
    modattn__zip_free(&z);
    return modattn__tbuf_finish(&w.b, out, false);
}
