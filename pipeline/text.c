/* pipeline/text.c — document kinds (by name and by sniffing the first bytes), the document-text
 * record and its line/page lookup, and the growing buffer the extractors write into. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/pipeline_internal.h"

const char *modattn_doc_kind_name(modattn_doc_kind k) {
    switch (k) {
    case MODATTN_DOC_BINARY: return "binary";
    case MODATTN_DOC_TEXT: return "text";
    case MODATTN_DOC_MARKDOWN: return "markdown";
    case MODATTN_DOC_HTML: return "html";
    case MODATTN_DOC_PDF: return "pdf";
    case MODATTN_DOC_DOCX: return "docx";
    case MODATTN_DOC_PPTX: return "pptx";
    case MODATTN_DOC_XLSX: return "xlsx";
    case MODATTN_DOC_ODT: return "odt";
    case MODATTN_DOC_ODP: return "odp";
    case MODATTN_DOC_ODS: return "ods";
    case MODATTN_DOC_EPUB: return "epub";
    case MODATTN_DOC_RTF: return "rtf";
    case MODATTN_DOC_EMAIL: return "email";
    case MODATTN_DOC_MBOX: return "mbox";
    case MODATTN_DOC_COMPRESSED: return "compressed";
    case MODATTN_DOC_DOC: return "doc";
    }
    return "unknown";
}

/* Text: no NUL, and control bytes plus bytes of ill-formed UTF-8 at most 10% of the sample. */
static bool looks_like_text(const unsigned char *h, size_t len) {
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = h[i];
        if (c == 0) return false;
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' &&
                c != 0x1b)
                bad++;
            else if (c == 0x7f)
                bad++;
            i++;
            continue;
        }
        bool ok;
        size_t k = modattn__utf8_next(h + i, len - i, &ok);
        /* a character cut by the end of the sample is not held against the file */
        if (!ok && i + k < len) bad += k;
        i += k;
    }
    return bad * 10 <= len;
}

static bool has_ext(const char *ext, const char *const *list) {
    for (; *list; list++)
        if (strcasecmp(ext, *list) == 0) return true;
    return false;
}

/* "<!doctype html" or "<html" after optional BOM and whitespace */
static bool starts_like_html(const unsigned char *h, size_t len) {
    size_t i = 0;
    if (len >= 3 && h[0] == 0xef && h[1] == 0xbb && h[2] == 0xbf) i = 3;
    while (i < len && isspace(h[i])) i++;
    static const char *const starts[] = {"<!doctype html", "<html", NULL};
    for (const char *const *s = starts; *s; s++) {
        size_t n = strlen(*s);
        if (len - i >= n && strncasecmp((const char *)h + i, *s, n) == 0) return true;
    }
    return false;
}

/* ------------------------------------------------------------------ issue 40's formats */

static bool ends_with_ci(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

static bool is_zip(const unsigned char *h, size_t len) {
    return h && len >= 4 && (memcmp(h, "PK\3\4", 4) == 0 || memcmp(h, "PK\5\6", 4) == 0);
}

static const char *compression(const unsigned char *h, size_t len) {
    if (!h) return NULL;
    if (len >= 2 && h[0] == 0x1f && h[1] == 0x8b) return "gzip";
    if (len >= 4 && memcmp(h, "BZh", 3) == 0 && h[3] >= '1' && h[3] <= '9') return "bzip2";
    if (len >= 6 && memcmp(h, "\xfd" "7zXZ\0", 6) == 0) return "xz";
    if (len >= 4 && memcmp(h, "\x28\xb5\x2f\xfd", 4) == 0) return "zstd";
    return NULL;
}

static bool tar_name(const char *base) {
    static const char *const t[] = {".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz", ".tar.zst",
                                    ".tzst", ".tar", NULL};
    for (int i = 0; t[i]; i++)
        if (ends_with_ci(base, t[i])) return true;
    return false;
}

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }

/* The kind of a zip from the local headers in its head: an OpenDocument or EPUB "mimetype" first
 * member, or Office Open XML parts (word/, ppt/, xl/) among the first members. */
static modattn_doc_kind zip_kind(const unsigned char *h, size_t len) {
    size_t o = 0;
    for (int i = 0; i < 64 && o + 30 <= len && memcmp(h + o, "PK\3\4", 4) == 0; i++) {
        uint32_t flags = le16(h + o + 6), method = le16(h + o + 8), csize = le32(h + o + 18);
        uint32_t nl = le16(h + o + 26), xl = le16(h + o + 28);
        if (o + 30 + nl > len) break;
        const char *nm = (const char *)h + o + 30;
        size_t data = o + 30 + nl + xl;
        if (i == 0 && nl == 8 && memcmp(nm, "mimetype", 8) == 0 && method == 0 && data + csize <= len) {
            const char *mt = (const char *)h + data;
            static const char od[] = "application/vnd.oasis.opendocument.";
            if (csize == 20 && memcmp(mt, "application/epub+zip", 20) == 0) return MODATTN_DOC_EPUB;
            if (csize > sizeof od - 1 && memcmp(mt, od, sizeof od - 1) == 0) {
                const char *sub = mt + sizeof od - 1;
                size_t sl = csize - (sizeof od - 1);
                if (sl >= 4 && memcmp(sub, "text", 4) == 0) return MODATTN_DOC_ODT;
                if (sl >= 12 && memcmp(sub, "presentation", 12) == 0) return MODATTN_DOC_ODP;
                if (sl >= 11 && memcmp(sub, "spreadsheet", 11) == 0) return MODATTN_DOC_ODS;
                return MODATTN_DOC_BINARY;
            }
        }
        if (nl >= 5 && memcmp(nm, "word/", 5) == 0) return MODATTN_DOC_DOCX;
        if (nl >= 4 && memcmp(nm, "ppt/", 4) == 0) return MODATTN_DOC_PPTX;
        if (nl >= 3 && memcmp(nm, "xl/", 3) == 0) return MODATTN_DOC_XLSX;
        if (flags & 8) break; /* sizes in a data descriptor after the data: cannot skip ahead */
        o = data + csize;
    }
    return MODATTN_DOC_BINARY;
}

/* "Name: value" header lines at the start (at least two, one of them From:, Subject:, Date: or
 * Message-ID:): the start of an e-mail message. */
static bool starts_like_mail(const unsigned char *h, size_t len) {
    int lines = 0;
    bool key = false;
    size_t i = 0;
    while (i < len && lines < 8) {
        size_t j = i;
        while (j < len && h[j] != ':' && h[j] != '\n' && (isalnum(h[j]) || h[j] == '-')) j++;
        if (j == i || j >= len || h[j] != ':') break;
        static const char *const keys[] = {"from", "subject", "date", "message-id", "to", NULL};
        for (int k = 0; keys[k]; k++)
            if (j - i == strlen(keys[k]) && strncasecmp((const char *)h + i, keys[k], j - i) == 0) key = true;
        lines++;
        while (j < len && h[j] != '\n') j++;
        i = j + 1;
        while (i < len && (h[i] == ' ' || h[i] == '\t')) { /* a folded line */
            while (i < len && h[i] != '\n') i++;
            i++;
        }
    }
    return lines >= 2 && key;
}

static const unsigned char k_ole2[8] = {0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1};

static bool is_ole2(const unsigned char *h, size_t len) { return h && len >= 512 && memcmp(h, k_ole2, 8) == 0; }

/* An OLE2 compound file's directory, as far as the head holds it: 1 when an entry names a stream
 * "WordDocument", 0 when the directory's sectors in the head hold none, -1 when the directory (or
 * the FAT that chains it) lies past the head. Follows the chain through the FAT sectors the
 * header lists, at most 64 directory sectors. */
static int ole2_has_word(const unsigned char *h, size_t len) {
    uint32_t shift = le16(h + 30);
    if (shift != 9 && shift != 12) return 0;
    size_t ss = (size_t)1 << shift;
    uint32_t sect = le32(h + 48); /* the directory's first sector */
    static const unsigned char name[26] = {'W', 0, 'o', 0, 'r', 0, 'd', 0, 'D', 0, 'o', 0, 'c', 0,
                                           'u', 0, 'm', 0, 'e', 0, 'n', 0, 't', 0, 0, 0};
    for (int n = 0; n < 64 && sect < 0xFFFFFFFAu; n++) {
        uint64_t off = ((uint64_t)sect + 1) * ss;
        if (off + ss > len) return -1;
        for (size_t e = 0; e + 128 <= ss; e += 128) {
            const unsigned char *d = h + off + e;
            if (le16(d + 64) == 26 && d[66] == 2 && memcmp(d, name, 26) == 0) return 1;
        }
        /* the next directory sector: FAT entry `sect`, in FAT sector sect / (ss / 4) */
        uint64_t per = ss / 4, fs = sect / per;
        if (fs >= 109) return -1;
        uint32_t fat_sect = le32(h + 76 + 4 * fs);
        uint64_t foff = ((uint64_t)fat_sect + 1) * ss + 4 * (sect % per);
        if (fat_sect >= 0xFFFFFFFAu) return 0;
        if (foff + 4 > len) return -1;
        sect = le32(h + foff);
    }
    return 0;
}

static bool starts_like_rtf(const unsigned char *h, size_t len) {
    size_t i = 0;
    while (i < len && isspace(h[i])) i++;
    return len - i >= 5 && memcmp(h + i, "{\\rtf", 5) == 0;
}

const char *modattn__sniff_unsupported(const char *name, const unsigned char *h, size_t len) {
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : (name ? name : "");
    if (!h) return "binary file";
    if (is_zip(h, len)) {
        if (ends_with_ci(base, ".jar")) return "a Java archive (a ZIP: not read)";
        return "a ZIP archive (not read)";
    }
    if (len >= 262 && memcmp(h + 257, "ustar", 5) == 0) return "a TAR archive (not read)";
    const char *c = compression(h, len);
    if (c && tar_name(base)) return "a compressed TAR archive (not read)";
    static const struct {
        size_t off, n;
        const char *magic, *what;
    } k[] = {
        {0, 8, "\x89PNG\r\n\x1a\n", "a PNG image (unsupported format)"},
        {0, 3, "\xff\xd8\xff", "a JPEG image (unsupported format)"},
        {0, 4, "GIF8", "a GIF image (unsupported format)"},
        {8, 4, "WEBP", "a WebP image (unsupported format)"},
        {8, 4, "WAVE", "a WAV sound file (unsupported format)"},
        {8, 4, "AVI ", "an AVI video (unsupported format)"},
        {4, 4, "ftyp", "an MP4/QuickTime media file (unsupported format)"},
        {0, 4, "OggS", "an Ogg media file (unsupported format)"},
        {0, 4, "fLaC", "a FLAC sound file (unsupported format)"},
        {0, 3, "ID3", "an MP3 sound file (unsupported format)"},
        {0, 4, "\x1a\x45\xdf\xa3", "a Matroska/WebM video (unsupported format)"},
        {0, 4, "\x7f" "ELF", "an ELF executable or library (unsupported format)"},
        {0, 4, "\xcf\xfa\xed\xfe", "a Mach-O executable (unsupported format)"},
        {0, 4, "\xca\xfe\xba\xbe", "a Java class or Mach-O file (unsupported format)"},
        {0, 4, "\0asm", "a WebAssembly module (unsupported format)"},
        {0, 2, "MZ", "a Windows executable (unsupported format)"},
        {0, 8, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
         "a legacy Microsoft Office (OLE2) file with no WordDocument stream found (.xls, .ppt, .msg ...: "
         "unsupported format)"},
        {0, 6, "7z\xbc\xaf\x27\x1c", "a 7-Zip archive (unsupported format)"},
        {0, 4, "Rar!", "a RAR archive (unsupported format)"},
        {0, 16, "SQLite format 3\0", "an SQLite database (unsupported format)"},
        {0, 4, "wOFF", "a web font (unsupported format)"},
        {0, 4, "\0\1\0\0", "a TrueType font (unsupported format)"},
        {0, 4, "OTTO", "an OpenType font (unsupported format)"},
        {0, 4, "\x93NUM", "a NumPy array (unsupported format)"},
        {0, 2, "\x1f\x9d", "an LZW-compressed (.Z) file (unsupported format)"},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (len >= k[i].off + k[i].n && memcmp(h + k[i].off, k[i].magic, k[i].n) == 0) return k[i].what;
    if (c) return "compressed binary data (not read: only text inside gzip/bzip2/xz/zstd is)";
    return "binary file";
}

modattn_doc_kind modattn_sniff_kind(const char *name, const unsigned char *head, size_t len) {
    if (len > MODATTN_INGEST_SNIFF_BYTES) len = MODATTN_INGEST_SNIFF_BYTES;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : (name ? name : "");
    const char *dot = strrchr(base, '.');
    const char *ext = dot && dot != base ? dot + 1 : "";
    /* containers and compressed files first: their bytes are not text */
    if (is_zip(head, len)) {
        modattn_doc_kind z = zip_kind(head, len);
        if (z != MODATTN_DOC_BINARY) return z;
        static const struct {
            const char *ext;
            modattn_doc_kind kind;
        } zx[] = {{"docx", MODATTN_DOC_DOCX}, {"docm", MODATTN_DOC_DOCX}, {"dotx", MODATTN_DOC_DOCX},
                  {"pptx", MODATTN_DOC_PPTX}, {"pptm", MODATTN_DOC_PPTX}, {"xlsx", MODATTN_DOC_XLSX},
                  {"xlsm", MODATTN_DOC_XLSX}, {"odt", MODATTN_DOC_ODT},   {"odp", MODATTN_DOC_ODP},
                  {"ods", MODATTN_DOC_ODS},   {"epub", MODATTN_DOC_EPUB}};
        for (size_t i = 0; i < sizeof zx / sizeof *zx; i++)
            if (strcasecmp(ext, zx[i].ext) == 0) return zx[i].kind;
        return MODATTN_DOC_BINARY; /* a ZIP archive (modattn__sniff_unsupported says so) */
    }
    if (compression(head, len)) return tar_name(base) ? MODATTN_DOC_BINARY : MODATTN_DOC_COMPRESSED;
    if (is_ole2(head, len)) {
        /* Word 97-2003 by its WordDocument stream; by name only when the head cannot tell */
        static const char *const doc[] = {"doc", "dot", NULL};
        int w = ole2_has_word(head, len);
        return w == 1 || (w < 0 && has_ext(ext, doc)) ? MODATTN_DOC_DOC : MODATTN_DOC_BINARY;
    }
    static const char *const pdf[] = {"pdf", NULL};
    static const char *const html[] = {"html", "htm", "xhtml", NULL};
    static const char *const md[] = {"md", "markdown", "mdown", "mkd", NULL};
    if ((head && len >= 5 && memcmp(head, "%PDF-", 5) == 0) || has_ext(ext, pdf))
        return MODATTN_DOC_PDF;
    /* UTF-16 with a byte order mark: judge the decoded start of the text */
    char u8[8192 / 2 * 3 + 4];
    int bom = modattn__utf16_bom(head, len);
    if (bom) {
        size_t n = len - 2 > 8192 ? 8192 : len - 2;
        n = modattn__utf16_decode(head + 2, n, bom == 2, u8);
        head = (const unsigned char *)u8;
        len = n;
    }
    if (!head || !looks_like_text(head, len)) return MODATTN_DOC_BINARY;
    if (!bom) {
        static const char *const eml[] = {"eml", NULL};
        static const char *const mbox[] = {"mbox", "mbx", NULL};
        if (starts_like_rtf(head, len)) return MODATTN_DOC_RTF;
        if (has_ext(ext, eml)) return MODATTN_DOC_EMAIL;
        if (has_ext(ext, mbox) || strcasecmp(base, "mbox") == 0) return MODATTN_DOC_MBOX;
        if (!*ext && len > 5 && memcmp(head, "From ", 5) == 0) {
            const unsigned char *nl = memchr(head, '\n', len);
            if (nl && starts_like_mail(nl + 1, len - (size_t)(nl + 1 - head))) return MODATTN_DOC_MBOX;
        }
        if (!*ext && starts_like_mail(head, len)) return MODATTN_DOC_EMAIL;
    }
    if (has_ext(ext, html)) return MODATTN_DOC_HTML;
    if (has_ext(ext, md)) return MODATTN_DOC_MARKDOWN;
    if (starts_like_html(head, len)) return MODATTN_DOC_HTML;
    return MODATTN_DOC_TEXT;
}

void modattn_doc_text_clear(modattn_doc_text *d) {
    if (!d) return;
    modattn_free(d->text);
    modattn_free(d->marks);
    memset(d, 0, sizeof *d);
}

int64_t modattn_doc_text_locate(const modattn_doc_text *d, size_t offset) {
    if (!d) return 0;
    if (!d->marks) {
        /* a text file: count the lines */
        if (!d->text) return 0;
        if (offset > d->len) offset = d->len;
        int64_t line = 1;
        const char *p = d->text, *end = d->text + offset;
        while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            line++;
            p++;
        }
        return line;
    }
    if (d->nmarks == 0 || offset < d->marks[0].offset) return d->nmarks ? d->marks[0].number : 0;
    size_t lo = 0, hi = d->nmarks; /* last mark with mark.offset <= offset */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->marks[mid].offset <= offset) lo = mid;
        else hi = mid;
    }
    return d->marks[lo].number;
}

/* ------------------------------------------------------------------ growing buffer */

static bool grow(void **p, size_t *cap, size_t need, size_t elem, int *err) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) {
            *err = modattn__error(MODATTN_ENOMEM, "extracted text too large");
            return false;
        }
        nc *= 2;
    }
    void *n = modattn__realloc(*p, nc * elem, MODATTN_MEM_OTHER);
    if (!n) {
        *err = modattn__mem_last_status();
        return false;
    }
    *p = n;
    *cap = nc;
    return true;
}

void modattn__tbuf_put(modattn__tbuf *b, const char *s, size_t len) {
    if (b->err || len == 0) return;
    if (b->n + len + 1 < b->n) {
        b->err = modattn__error(MODATTN_ENOMEM, "extracted text too large");
        return;
    }
    if (!grow((void **)&b->p, &b->cap, b->n + len + 1, 1, &b->err)) return;
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

void modattn__tbuf_mark(modattn__tbuf *b, int64_t number) {
    if (b->err) return;
    if (b->nmarks) {
        modattn_text_mark *last = &b->marks[b->nmarks - 1];
        if (last->number == number) return;
        if (last->offset == b->n) {
            last->number = number;
            return;
        }
    }
    if (!grow((void **)&b->marks, &b->mcap, b->nmarks + 1, sizeof *b->marks, &b->err)) return;
    b->marks[b->nmarks++] = (modattn_text_mark){b->n, number};
}

int modattn__tbuf_finish(modattn__tbuf *b, modattn_doc_text *d, bool pages) {
    memset(d, 0, sizeof *d);
    if (b->err) {
        int st = b->err;
        modattn__tbuf_free(b);
        return st;
    }
    if (!grow((void **)&b->p, &b->cap, b->n + 1, 1, &b->err)) {
        int st = b->err;
        modattn__tbuf_free(b);
        return st;
    }
    b->p[b->n] = '\0';
    d->text = b->p;
    d->len = b->n;
    d->marks = b->marks;
    d->nmarks = b->nmarks;
    d->pages = pages;
    if (!d->marks) {
        /* an empty mark table still means "not a text file": give it one entry */
        d->marks = modattn__malloc(sizeof *d->marks, MODATTN_MEM_OTHER);
        if (!d->marks) {
            modattn_free(d->text);
            memset(d, 0, sizeof *d);
            memset(b, 0, sizeof *b);
            return modattn__mem_last_status();
        }
        d->marks[0] = (modattn_text_mark){0, 1}; /* line 1 or page 1 */
        d->nmarks = 1;
    }
    memset(b, 0, sizeof *b);
    return 0;
}

void modattn__tbuf_free(modattn__tbuf *b) {
    modattn_free(b->p);
    modattn_free(b->marks);
    memset(b, 0, sizeof *b);
}
