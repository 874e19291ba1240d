/* pipeline/internal_ingest.h — the library's own functions of modattn/ingest.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_PIPELINE_INTERNAL_INGEST_H
#define MODATTN_PIPELINE_INTERNAL_INGEST_H

#include "modattn/ingest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For a file sniffed as MODATTN_DOC_BINARY: why it is not read, naming its format when it is
 * known ("a ZIP archive (not read)": the indexer walks the archives it can read as folders;
 * "a PNG image (unsupported
 * format)"), else "binary file". Never NULL; a static string. */
const char *modattn__sniff_unsupported(const char *name, const unsigned char *head, size_t len);

/* Copy of s[0..len) with every ill-formed UTF-8 sequence replaced by U+FFFD (EF BF BD), one per
 * maximal subpart (Unicode 15 section 3.9, as Python's errors="replace"). Ownership: modattn_free;
 * *out_len gets its length (NUL-terminated too). NULL on allocation failure. */
char *modattn__utf8_sanitize(const char *s, size_t len, size_t *out_len);

/* 1 if s starts with a UTF-16 little-endian byte order mark (FF FE), 2 for big-endian (FE FF),
 * else 0. */
int modattn__utf16_bom(const void *s, size_t len);

/* UTF-16 text that starts with a byte order mark, as UTF-8 without the mark: an unpaired
 * surrogate or an odd last byte becomes U+FFFD (Python's decode("utf-16", errors="replace")).
 * Ownership: modattn_free; *out_len gets its length (NUL-terminated too). NULL with
 * MODATTN_EINVAL when there is no mark, or on allocation failure. */
char *modattn__utf16_to_utf8(const char *s, size_t len, size_t *out_len);

/* true if s[0..len) is well-formed UTF-8. */
bool modattn__utf8_valid(const char *s, size_t len);

/* Stored paths are absolute and lexically normalised ("a/./b/../c" -> "/cwd/a/c"; symbolic
 * links kept as named). Ownership: modattn_free. NULL on allocation failure or no cwd. */
char *modattn__path_absolute(const char *path);

#ifdef __cplusplus
}
#endif
#endif
