/* pipeline/fmt_rtf.c — the text of an RTF document, by a small reader of the RTF 1.9 syntax (no
 * well-kept Debian library reads RTF to text): groups, control words and symbols, \'hh bytes in
 * the document's code page (Windows-1252 and Latin-1; others read as 1252), \uN with its \ucN
 * fallback characters skipped, \binN data skipped, and destinations that are not body text
 * (\fonttbl, \colortbl, \stylesheet, \info, \pict, field instructions, every \* group) dropped.
 * \par, \line, \row, \sect and \page break lines, \tab and \cell are tabs. Marks: paragraph
 * numbers. Output grows at most 4 bytes per input byte, so there is no bomb to defuse; groups
 * nested deeper than 1000 are a refusal (no input needs that). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"

#define RTF_MAX_DEPTH 1000

typedef struct rtf_state {
    int uc;     /* fallback characters after \uN */
    bool skip;  /* inside a destination that is not text */
} rtf_state;

/* Windows-1252's 0x80..0x9F (0: undefined, read as U+FFFD) */
static const uint16_t k_cp1252[32] = {0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
                                      0x2039, 0x0152, 0, 0x017D, 0, 0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
                                      0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E, 0x0178};

static uint32_t byte_cp(unsigned char c) {
    if (c >= 0x80 && c < 0xA0) return k_cp1252[c - 0x80] ? k_cp1252[c - 0x80] : 0xFFFD;
    return c;
}

static bool in(const char *word, const char *const *list) {
    for (; *list; list++)
        if (strcmp(word, *list) == 0) return true;
    return false;
}

static const char *const k_skip_dest[] = {
    "fonttbl", "colortbl", "stylesheet", "info", "pict", "object", "themedata", "colorschememapping",
    "datastore", "latentstyles", "listtable", "listoverridetable", "rsidtbl", "generator", "xmlnstbl",
    "mmathPr", "fldinst", "pgdsctbl", "filetbl", "revtbl", "bkmkstart", "bkmkend", "nonshppict",
    "datafield", "template", "userprops", "header", "headerl", "headerr", "headerf", "footer", "footerl",
    "footerr", "footerf", "xe", "tc", "txe", "private", "operator", "author", "title", "subject",
    "keywords", "comment", "doccomm", "company", "category", "wgrffmtfilter", "defchp", "defpap", NULL};

int modattn__extract_rtf(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    (void)cap;
    memset(out, 0, sizeof *out);
    const unsigned char *p = (const unsigned char *)buf, *end = p + len;
    while (p < end && (*p == ' ' || *p == '\r' || *p == '\n' || *p == '\t')) p++;
    if (p < end && *p == '}') return modattn__error(MODATTN_EFORMAT, "malformed RTF: a '}' closes no group");
    if (end - p < 5 || memcmp(p, "{\\rtf", 5) != 0)
        return modattn__error(MODATTN_EFORMAT, "malformed RTF: it does not start with {\\rtf");
    rtf_state *stack = malloc(sizeof *stack * (RTF_MAX_DEPTH + 1));
    if (!stack) return modattn__error(MODATTN_ENOMEM, "out of memory");
    int depth = 0;
    rtf_state cur = {1, false};
    modattn__textw w;
    memset(&w, 0, sizeof w);
    int64_t para = 1;
    int pending_skip = 0;   /* fallback characters still to skip after \uN */
    uint32_t hi_surrogate = 0;
    bool first_in_group = false; /* the next control word is the group's first (a destination?) */
    int st = 0;
    modattn__textw_mark(&w, 1);
    while (p < end && !w.b.err) {
        unsigned char c = *p;
        if (c == '{') {
            if (depth >= RTF_MAX_DEPTH) {
                st = modattn__error(MODATTN_EFORMAT, "malformed RTF: groups nested deeper than %d", RTF_MAX_DEPTH);
                break;
            }
            stack[depth++] = cur;
            first_in_group = true;
            pending_skip = 0;
            p++;
            continue;
        }
        if (c == '}') {
            if (depth == 0) {
                st = modattn__error(MODATTN_EFORMAT, "malformed RTF: a '}' closes no group");
                break;
            }
            cur = stack[--depth];
            pending_skip = 0;
            first_in_group = false;
            p++;
            if (depth == 0) break; /* the document's group is closed: what follows is not RTF */
            continue;
        }
        if (c == '\r' || c == '\n') {
            p++;
            continue;
        }
        if (c != '\\' && c != 0 && c < 0x80 && !cur.skip && pending_skip == 0) {
            /* a run of plain ASCII text at once */
            const unsigned char *q = p;
            while (q < end && *q != 0 && *q < 0x80 && *q != '\\' && *q != '{' && *q != '}' && *q != '\r' && *q != '\n') q++;
            modattn__textw_put(&w, (const char *)p, (size_t)(q - p));
            first_in_group = false;
            p = q;
            continue;
        }
        if (c != '\\') {
            first_in_group = false;
            p++;
            if (pending_skip > 0) {
                pending_skip--;
                continue;
            }
            if (!cur.skip) modattn__textw_cp(&w, c < 0x80 ? c : byte_cp(c));
            continue;
        }
        /* a control word or symbol */
        p++;
        if (p >= end) break;
        if (!isalpha(*p)) {
            unsigned char s = *p++;
            bool was_first = first_in_group;
            first_in_group = false;
            if (s == '*') {
                if (was_first) cur.skip = true; /* {\* ...}: a destination we may not know */
                continue;
            }
            if (s == '\'') {
                unsigned v = 0;
                int k = 0;
                while (k < 2 && p < end && isxdigit(*p)) {
                    v = v * 16 + (unsigned)(isdigit(*p) ? *p - '0' : (tolower(*p) - 'a' + 10));
                    p++, k++;
                }
                if (pending_skip > 0) {
                    pending_skip--;
                    continue;
                }
                if (!cur.skip && k) modattn__textw_cp(&w, byte_cp((unsigned char)v));
                continue;
            }
            if (pending_skip > 0) {
                pending_skip--;
                continue;
            }
            if (cur.skip) continue;
            if (s == '\\' || s == '{' || s == '}') modattn__textw_cp(&w, s);
            else if (s == '~') modattn__textw_cp(&w, 0xA0);
            else if (s == '_') modattn__textw_cp(&w, 0x2011);
            else if (s == '\n' || s == '\r') {
                modattn__textw_sep(&w, 2);
                modattn__textw_mark(&w, ++para);
            }
            continue;
        }
        char word[33];
        size_t wl = 0;
        while (p < end && isalpha(*p)) {
            if (wl < sizeof word - 1) word[wl++] = (char)*p;
            p++;
        }
        word[wl] = '\0';
        bool has_num = false;
        long num = 0;
        bool neg = false;
        if (p < end && *p == '-') neg = true, p++;
        while (p < end && isdigit(*p)) {
            if (num < 100000000) num = num * 10 + (*p - '0');
            has_num = true;
            p++;
        }
        if (neg) num = -num;
        if (p < end && *p == ' ') p++;
        bool was_first = first_in_group;
        first_in_group = false;
        if (strcmp(word, "bin") == 0) { /* binary data: skipped whole */
            size_t n = has_num && num > 0 ? (size_t)num : 0;
            p += n < (size_t)(end - p) ? n : (size_t)(end - p);
            continue;
        }
        if (strcmp(word, "uc") == 0) {
            cur.uc = has_num && num >= 0 && num < 16 ? (int)num : 1;
            continue;
        }
        if (strcmp(word, "u") == 0 && has_num) {
            uint32_t u = (uint32_t)(num < 0 ? num + 65536 : num) & 0xFFFF;
            pending_skip = cur.uc;
            if (cur.skip) continue;
            if (u >= 0xD800 && u <= 0xDBFF) {
                hi_surrogate = u;
                continue;
            }
            if (u >= 0xDC00 && u <= 0xDFFF && hi_surrogate) {
                modattn__textw_cp(&w, 0x10000 + ((hi_surrogate - 0xD800) << 10) + (u - 0xDC00));
                hi_surrogate = 0;
                continue;
            }
            hi_surrogate = 0;
            modattn__textw_cp(&w, u);
            continue;
        }
        if (pending_skip > 0) { /* a control word stands for one fallback character */
            pending_skip--;
            continue;
        }
        (void)was_first;
        if (in(word, k_skip_dest)) {
            cur.skip = true;
            continue;
        }
        if (cur.skip) continue;
        if (strcmp(word, "par") == 0 || strcmp(word, "sect") == 0 || strcmp(word, "page") == 0) {
            modattn__textw_sep(&w, 2);
            modattn__textw_mark(&w, ++para);
        } else if (strcmp(word, "line") == 0 || strcmp(word, "row") == 0) {
            modattn__textw_sep(&w, 2);
        } else if (strcmp(word, "tab") == 0 || strcmp(word, "cell") == 0) {
            modattn__textw_raw(&w, "\t", 1);
        } else if (strcmp(word, "emdash") == 0) modattn__textw_cp(&w, 0x2014);
        else if (strcmp(word, "endash") == 0) modattn__textw_cp(&w, 0x2013);
        else if (strcmp(word, "bullet") == 0) modattn__textw_cp(&w, 0x2022);
        else if (strcmp(word, "lquote") == 0) modattn__textw_cp(&w, 0x2018);
        else if (strcmp(word, "rquote") == 0) modattn__textw_cp(&w, 0x2019);
        else if (strcmp(word, "ldblquote") == 0) modattn__textw_cp(&w, 0x201C);
        else if (strcmp(word, "rdblquote") == 0) modattn__textw_cp(&w, 0x201D);
        else if (strcmp(word, "emspace") == 0 || strcmp(word, "enspace") == 0) modattn__textw_cp(&w, ' ');
    }
    free(stack);
    if (st) {
        modattn__tbuf_free(&w.b);
        return st;
    }
    return modattn__tbuf_finish(&w.b, out, false);
}
