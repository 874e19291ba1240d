/* pipeline/fmt_compressed.c — text inside .gz, .bz2, .xz and .zst: libarchive's "raw" format
 * behind its gzip/bzip2/xz/zstd filters decompresses in memory, at most `cap` bytes
 * (--max-file-size): a decompression bomb stops there with the reason. What comes out is read as
 * a file of that content would be: text (positions: its lines), HTML by html.c's rules; a TAR
 * inside is an archive (walked by fmt_archive.c's reader once the indexer calls it), anything
 * else binary: both refused with the reason. */
#include <archive.h>
#include <archive_entry.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/fmt_internal.h"

static const char *filter_name(const unsigned char *h, size_t n) {
    if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b) return "gzip";
    if (n >= 3 && memcmp(h, "BZh", 3) == 0) return "bzip2";
    if (n >= 6 && memcmp(h, "\xfd" "7zXZ\0", 6) == 0) return "xz";
    if (n >= 4 && memcmp(h, "\x28\xb5\x2f\xfd", 4) == 0) return "zstd";
    return NULL;
}

int modattn__extract_compressed(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    const char *what = filter_name((const unsigned char *)buf, len);
    if (!what) return modattn__error(MODATTN_EFORMAT, "not gzip, bzip2, xz or zstd data");
    struct archive *a = archive_read_new();
    if (!a) return modattn__error(MODATTN_ENOMEM, "libarchive: out of memory");
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_format_raw(a);
    struct archive_entry *e;
    int st = 0;
    char *data = NULL;
    size_t n = 0, dcap = 0;
    if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK || archive_read_next_header(a, &e) < ARCHIVE_WARN) {
        st = modattn__error(MODATTN_EFORMAT, "damaged %s data: %s", what,
                           archive_error_string(a) ? archive_error_string(a) : "unreadable");
        goto done;
    }
    for (;;) {
        if (n + 65536 + 1 > dcap) {
            size_t nc = dcap ? dcap * 2 : 1 << 20;
            if (nc > cap + 65536 + 1) nc = cap + 65536 + 1;
            if (nc <= dcap) nc = dcap + 65536 + 1;
            char *nd = modattn__realloc(data, nc, MODATTN_MEM_OTHER);
            if (!nd) {
                st = modattn__mem_last_status();
                goto done;
            }
            data = nd;
            dcap = nc;
        }
        la_ssize_t k = archive_read_data(a, data + n, 65536);
        if (k == 0) break;
        if (k < 0) {
            st = modattn__error(MODATTN_EFORMAT, "damaged or truncated %s data: %s", what,
                               archive_error_string(a) ? archive_error_string(a) : "unreadable");
            goto done;
        }
        n += (size_t)k;
        if (n > cap) {
            st = modattn__error(MODATTN_ERANGE,
                               "%s data that expands past %zu bytes (--max-file-size): not read (a decompression "
                               "bomb?)",
                               what, cap);
            goto done;
        }
    }
    data = data ? data : modattn__malloc(1, MODATTN_MEM_OTHER);
    if (!data) {
        st = modattn__mem_last_status();
        goto done;
    }
    data[n] = '\0';
    if (n >= 262 && memcmp(data + 257, "ustar", 5) == 0) {
        st = modattn__error(MODATTN_EFORMAT, "a %s-compressed TAR archive (not read: name it .tar.gz, .tgz, .tar.xz ... to walk it as a folder)", what);
        goto done;
    }
    if (modattn__utf16_bom(data, n)) {
        size_t m = 0;
        char *u8 = modattn__utf16_to_utf8(data, n, &m);
        if (!u8) {
            st = modattn__mem_last_status();
            goto done;
        }
        modattn_free(data);
        data = u8;
        n = m;
    }
    modattn_doc_kind k = modattn_sniff_kind(NULL, (const unsigned char *)data, n);
    if (k == MODATTN_DOC_HTML) {
        st = modattn_extract_html(data, n, out);
    } else if (k == MODATTN_DOC_TEXT || k == MODATTN_DOC_MARKDOWN || k == MODATTN_DOC_RTF ||
               k == MODATTN_DOC_EMAIL || k == MODATTN_DOC_MBOX) {
        /* the decompressed bytes are the text; no marks: positions are its lines, counted */
        out->text = data;
        out->len = n;
        data = NULL;
    } else {
        st = modattn__error(MODATTN_EFORMAT, "%s-compressed binary data (not read: only text inside is)", what);
    }
done:
    archive_read_free(a);
    modattn_free(data);
    return st;
}
