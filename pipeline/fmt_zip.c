/* pipeline/fmt_zip.c — what the format extractors share: zip members read into memory through
 * libarchive (bounded, nothing written to disk), hardened XML parsing through libxml2, and a text
 * writer that collapses white space as html.c does. */
#include <archive.h>
#include <archive_entry.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <limits.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"

/* A member name that would land outside the archive if it were extracted ("zip slip"): absolute,
 * a drive letter, or a ".." segment (either slash). Refused even though nothing is ever
 * extracted: such an archive is hostile or broken, and its names would become odd paths. */
static bool name_escapes(const char *name) {
    if (!name || !*name) return true;
    if (name[0] == '/' || name[0] == '\\') return true;
    if (((name[0] | 32) >= 'a' && (name[0] | 32) <= 'z') && name[1] == ':') return true;
    const char *p = name;
    while (*p) {
        const char *e = p;
        while (*e && *e != '/' && *e != '\\') e++;
        if (e - p == 2 && p[0] == '.' && p[1] == '.') return true;
        p = *e ? e + 1 : e;
    }
    return false;
}

bool modattn__name_escapes(const char *name);
bool modattn__name_escapes(const char *name) { return name_escapes(name); }

int modattn__zip_load(const char *buf, size_t len, size_t cap, const char *what,
                      bool (*want)(const char *name, void *ud), void *ud, modattn__zip *z) {
    memset(z, 0, sizeof *z);
    struct archive *a = archive_read_new();
    if (!a) return modattn__error(MODATTN_ENOMEM, "libarchive: out of memory");
    archive_read_support_format_zip(a);
    if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK) {
        int st = modattn__error(MODATTN_EFORMAT, "not a readable %s (a zip container): %s", what,
                               archive_error_string(a) ? archive_error_string(a) : "unknown zip error");
        archive_read_free(a);
        return st;
    }
    size_t total = 0;
    int st = 0;
    struct archive_entry *e;
    for (;;) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
            st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated %s (zip): %s", what,
                               archive_error_string(a) ? archive_error_string(a) : "unreadable entry");
            break;
        }
        const char *name = archive_entry_pathname(e);
        if (name_escapes(name)) {
            st = modattn__error(MODATTN_EFORMAT, "a %s whose member name \"%.200s\" escapes the archive (zip slip)",
                               what, name ? name : "");
            break;
        }
        if (archive_entry_is_encrypted(e)) {
            st = modattn__error(MODATTN_EFORMAT, "a %s with an encrypted member (%.200s): not read", what, name);
            break;
        }
        if (archive_entry_filetype(e) != AE_IFREG) continue;
        if (want ? !want(name, ud) : false) continue;
        if (z->n == z->cap_m) {
            size_t nc = z->cap_m ? z->cap_m * 2 : 8;
            modattn__zmember *nm = modattn__realloc(z->m, nc * sizeof *nm, MODATTN_MEM_OTHER);
            if (!nm) {
                st = modattn__mem_last_status();
                break;
            }
            z->m = nm;
            z->cap_m = nc;
        }
        modattn__zmember *m = &z->m[z->n];
        memset(m, 0, sizeof *m);
        m->name = modattn__strdup(name, MODATTN_MEM_OTHER);
        if (!m->name) {
            st = modattn__mem_last_status();
            break;
        }
        z->n++;
        size_t mcap = 0;
        char tmp[65536];
        for (;;) {
            la_ssize_t k = archive_read_data(a, tmp, sizeof tmp);
            if (k == 0) break;
            if (k < 0) {
                st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated %s (zip member %.200s): %s", what, name,
                                   archive_error_string(a) ? archive_error_string(a) : "unreadable data");
                break;
            }
            if ((size_t)k > cap - total || total + (size_t)k < total) {
                st = modattn__error(MODATTN_ERANGE,
                                   "a %s whose members expand past %zu bytes (--max-file-size): not read "
                                   "(a decompression bomb?)",
                                   what, cap);
                break;
            }
            if (m->len + (size_t)k + 1 > mcap) {
                size_t nc = mcap ? mcap : 65536;
                while (nc < m->len + (size_t)k + 1) nc *= 2;
                char *nd = modattn__realloc(m->data, nc, MODATTN_MEM_OTHER);
                if (!nd) {
                    st = modattn__mem_last_status();
                    break;
                }
                m->data = nd;
                mcap = nc;
            }
            memcpy(m->data + m->len, tmp, (size_t)k);
            m->len += (size_t)k;
            total += (size_t)k;
        }
        if (st) break;
        if (!m->data && !(m->data = modattn__malloc(1, MODATTN_MEM_OTHER))) {
            st = modattn__mem_last_status();
            break;
        }
        m->data[m->len] = '\0';
    }
    archive_read_free(a);
    if (st) modattn__zip_free(z);
    return st;
}

const modattn__zmember *modattn__zip_get(const modattn__zip *z, const char *name) {
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->m[i].name, name) == 0) return &z->m[i];
    return NULL;
}

void modattn__zip_free(modattn__zip *z) {
    for (size_t i = 0; i < z->n; i++) {
        modattn_free(z->m[i].name);
        modattn_free(z->m[i].data);
    }
    modattn_free(z->m);
    memset(z, 0, sizeof *z);
}

/* ------------------------------------------------------------------ XML */

static bool mem_has(const char *buf, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = buf; len >= n;) {
        const char *q = memchr(p, needle[0], len - n + 1);
        if (!q) return false;
        if (memcmp(q, needle, n) == 0) return true;
        len -= (size_t)(q + 1 - p);
        p = q + 1;
    }
    return false;
}

int modattn__xml_parse(const char *buf, size_t len, const char *what, xmlDocPtr *doc) {
    *doc = NULL;
    if (len > INT_MAX) return modattn__error(MODATTN_ERANGE, "%s: an XML part of %zu bytes", what, len);
    /* Office, OpenDocument and EPUB parts never need entity declarations; a part that has them is
     * hostile (billion laughs, external entities) or not one of ours */
    if (mem_has(buf, len, "<!ENTITY"))
        return modattn__error(MODATTN_EFORMAT, "%s: its XML declares entities (not read: a possible XML bomb)", what);
    xmlInitParser();
    *doc = xmlReadMemory(buf, (int)len, NULL, NULL,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_COMPACT |
                             XML_PARSE_NOCDATA);
    if (!*doc) return modattn__error(MODATTN_EFORMAT, "%s: ill-formed XML", what);
    return 0;
}

/* ------------------------------------------------------------------ text writer */

void modattn__textw_sep(modattn__textw *w, int sep) {
    if (sep > w->pending) w->pending = sep;
}

static void pay(modattn__textw *w) {
    if (w->pending == 1 && w->b.n && (w->b.p[w->b.n - 1] == '\n' || w->b.p[w->b.n - 1] == '\t')) w->pending = 0;
    if (w->pending && w->b.n) {
        static const char *const seps[] = {"", " ", "\n", "\n\n"};
        modattn__tbuf_put(&w->b, seps[w->pending], strlen(seps[w->pending]));
    }
    w->pending = 0;
}

void modattn__textw_mark(modattn__textw *w, int64_t number) {
    pay(w);
    modattn__tbuf_mark(&w->b, number);
}

void modattn__textw_raw(modattn__textw *w, const char *s, size_t len) {
    if (!len) return;
    pay(w);
    modattn__tbuf_put(&w->b, s, len);
}

void modattn__textw_cp(modattn__textw *w, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
        u[3] = (char)(0x80 | (cp & 63)), n = 4;
    if (n == 1) modattn__textw_put(w, u, 1);
    else modattn__textw_raw(w, u, n);
}

void modattn__textw_put(modattn__textw *w, const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            modattn__textw_sep(w, 1);
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' && s[j] != '\r' && s[j] != '\f' &&
               s[j] != '\v')
            j++;
        modattn__textw_raw(w, s + i, j - i);
        i = j;
    }
}

int modattn__textw_html(modattn__textw *w, const char *html, size_t len) {
    if (mem_has(html, len, "<!ENTITY"))
        return modattn__error(MODATTN_EFORMAT, "XHTML that declares entities (not read: a possible XML bomb)");
    modattn_doc_text d;
    int st = modattn_extract_html(html, len, &d);
    if (st) return st;
    modattn__textw_raw(w, d.text, d.len);
    modattn_doc_text_clear(&d);
    return w->b.err;
}
