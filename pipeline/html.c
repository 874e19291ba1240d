/* pipeline/html.c — the visible text of an HTML document, through libxml2's HTML parser (which
 * copes with real-world tag soup, decodes entities and honours a <meta charset>).
 *
 * The tree is walked without recursion. Dropped: script, style, noscript, template, iframe,
 * object, embed, canvas and any element with the `hidden` attribute or an inline
 * `display:none` style; comments and processing instructions are not text. Whitespace collapses
 * to one space as a browser renders it, except inside <pre>/<textarea>. Block elements (p, div,
 * li, h1-h6, tr, ...) start a new line, paragraphs and headings leave a blank line, <br> breaks a
 * line, table cells are separated by a tab. Each text node marks the source line it came from
 * (libxml2 counts lines up to 65535; later lines read as 65535). XML_PARSE_HUGE lifts libxml2's
 * limits on text node size and nesting (256 -> 2048 levels): files are capped by the indexer's
 * size limit instead; text nested deeper than 2048 elements is lost. */
#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "core/internal_status.h"
#include "pipeline/pipeline_internal.h"

static pthread_once_t g_xml_once = PTHREAD_ONCE_INIT;
static void xml_setup(void) { xmlInitParser(); }

typedef struct html_out {
    modattn__tbuf b;
    int pending;     /* 0 nothing, 1 space, 2 newline, 3 blank line: separators owed before the
                      * next visible character */
    int pre;         /* depth of <pre>/<textarea> */
} html_out;

static bool name_in(const xmlChar *name, const char *const *list) {
    for (; *list; list++)
        if (strcasecmp((const char *)name, *list) == 0) return true;
    return false;
}

static const char *const k_skip[] = {"script", "style", "noscript", "template", "iframe", "object",
                                     "embed", "canvas", NULL};
static const char *const k_para[] = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre",
                                     "blockquote", "table", "ul", "ol", "dl", "hr", "title",
                                     "section", "article", "figure", "address", "header",
                                     "footer", "nav", "aside", "main", "form", "fieldset",
                                     "details", NULL};
static const char *const k_line[] = {"div", "li", "tr", "dt", "dd", "caption", "figcaption",
                                     "summary", "legend", "option", "thead", "tbody", "tfoot",
                                     "body", "html", "center", "menu", "dir", "noframes", "frameset",
                                     "textarea", "label", "select", NULL};
static const char *const k_cell[] = {"td", "th", NULL};
static const char *const k_pre[] = {"pre", "textarea", NULL};

static void owe(html_out *o, int sep) {
    if (sep > o->pending) o->pending = sep;
}

/* Writes what is owed, unless nothing was written yet (no leading blank lines). */
static void pay(html_out *o) {
    if (o->pending == 1 && o->b.n && (o->b.p[o->b.n - 1] == '\n' || o->b.p[o->b.n - 1] == '\t'))
        o->pending = 0;
    if (o->pending && o->b.n) {
        static const char *const seps[] = {"", " ", "\n", "\n\n"};
        modattn__tbuf_put(&o->b, seps[o->pending], strlen(seps[o->pending]));
    }
    o->pending = 0;
}

/* The source line of a text node; libxml2 answers -1 or 0 for nodes it made up (the implied
 * <html>/<body> of a fragment): those keep the line before, or 1 at the start. */
static void mark_line(html_out *o, const xmlNode *node) {
    long line = xmlGetLineNo(node);
    if (line >= 1) modattn__tbuf_mark(&o->b, line);
    else if (o->b.nmarks == 0) modattn__tbuf_mark(&o->b, 1);
}

static void put_text(html_out *o, const xmlNode *node) {
    const unsigned char *s = node->content;
    if (!s) return;
    bool marked = false;
    size_t i = 0, n = strlen((const char *)s);
    while (i < n) {
        unsigned char c = s[i];
        bool ws = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
        size_t k = 1;
        if (c == 0xc2 && i + 1 < n && s[i + 1] == 0xa0) { /* no-break space */
            ws = true;
            k = 2;
        }
        if (o->pre) {
            if (!marked) {
                pay(o);
                mark_line(o, node);
                marked = true;
            }
            if (k == 2) modattn__tbuf_put(&o->b, " ", 1);
            else modattn__tbuf_put(&o->b, (const char *)s + i, 1);
            i += k;
            continue;
        }
        if (ws) {
            owe(o, 1);
            i += k;
            continue;
        }
        /* a run of visible bytes */
        size_t j = i;
        while (j < n) {
            unsigned char d = s[j];
            if (d == ' ' || d == '\t' || d == '\n' || d == '\r' || d == '\f') break;
            if (d == 0xc2 && j + 1 < n && s[j + 1] == 0xa0) break;
            j++;
        }
        pay(o);
        if (!marked) {
            mark_line(o, node);
            marked = true;
        }
        modattn__tbuf_put(&o->b, (const char *)s + i, j - i);
        i = j;
    }
}

static bool hidden(const xmlNode *el) {
    if (name_in(el->name, k_skip)) return true;
    for (const xmlAttr *a = el->properties; a; a = a->next) {
        if (!a->name) continue;
        if (strcasecmp((const char *)a->name, "hidden") == 0) return true;
        if (strcasecmp((const char *)a->name, "style") == 0 && a->children &&
            a->children->content) {
            /* "display : none" in any spacing and case */
            char squeezed[256];
            size_t k = 0;
            for (const xmlChar *p = a->children->content; *p && k + 1 < sizeof squeezed; p++)
                if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
                    squeezed[k++] = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
            squeezed[k] = '\0';
            if (strstr(squeezed, "display:none")) return true;
        }
    }
    return false;
}

static int block_sep(const xmlNode *el) {
    if (name_in(el->name, k_para)) return 3;
    if (name_in(el->name, k_line)) return 2;
    if (name_in(el->name, k_cell)) return 1;
    return 0;
}

static void enter(html_out *o, const xmlNode *el) {
    int sep = block_sep(el);
    if (sep == 1) {
        /* cells: a tab between cells of a row; the first cell of a row starts its line */
        if (o->pending >= 2 || !o->b.n || o->b.p[o->b.n - 1] == '\n') {
            owe(o, 1);
        } else {
            o->pending = 0;
            modattn__tbuf_put(&o->b, "\t", 1);
        }
    } else if (sep) {
        owe(o, sep);
    }
    if (strcasecmp((const char *)el->name, "br") == 0) {
        pay(o);
        modattn__tbuf_put(&o->b, "\n", 1);
    }
    if (name_in(el->name, k_pre)) o->pre++;
}

static void leave(html_out *o, const xmlNode *el) {
    int sep = block_sep(el);
    if (sep >= 2) owe(o, sep);
    if (name_in(el->name, k_pre) && o->pre > 0) o->pre--;
}

int modattn_extract_html(const char *html, size_t len, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    if (len > INT_MAX) return modattn__error(MODATTN_ERANGE, "HTML of %zu bytes", len);
    pthread_once(&g_xml_once, xml_setup);
    htmlDocPtr doc = htmlReadMemory(html, (int)len, NULL, NULL,
                                    HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                                        HTML_PARSE_NONET | HTML_PARSE_COMPACT | XML_PARSE_HUGE);
    html_out o;
    memset(&o, 0, sizeof o);
    if (!doc) {
        /* an empty or whitespace-only document has no tree: that is no text, not an error */
        size_t i = 0;
        while (i < len && (html[i] == ' ' || html[i] == '\n' || html[i] == '\r' || html[i] == '\t'))
            i++;
        if (i == len) return modattn__tbuf_finish(&o.b, out, false);
        return modattn__error(MODATTN_EFORMAT, "libxml2 found no HTML document");
    }
    xmlNode *root = xmlDocGetRootElement(doc);
    xmlNode *n = root;
    while (n && !o.b.err) {
        bool descend = false;
        if (n->type == XML_ELEMENT_NODE) {
            if (!hidden(n)) {
                enter(&o, n);
                descend = n->children != NULL;
                if (!descend) leave(&o, n);
            }
        } else if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
            put_text(&o, n);
        }
        if (descend) {
            n = n->children;
            continue;
        }
        /* next sibling, or climb, closing the elements we leave */
        while (n && n != root && !n->next) {
            n = n->parent;
            if (n && n->type == XML_ELEMENT_NODE) leave(&o, n);
        }
        if (!n || n == root) break;
        n = n->next;
    }
    xmlFreeDoc(doc);
    return modattn__tbuf_finish(&o.b, out, false);
}
