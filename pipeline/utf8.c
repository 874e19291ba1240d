/* pipeline/utf8.c — UTF-8 validation and repair (U+FFFD for each maximal subpart of an ill-formed
 * sequence, Unicode 15 section 3.9 and Table 3-7; what Python's errors="replace" does, and so what
 * the tokenizer does before it tokenises). */
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/pipeline_internal.h"

size_t modattn__utf8_next(const unsigned char *s, size_t len, bool *valid) {
    unsigned char b = s[0];
    *valid = true;
    if (b < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b == 0xe0) { need = 2; lo = 0xa0; }
    else if (b >= 0xe1 && b <= 0xec) need = 2;
    else if (b == 0xed) { need = 2; hi = 0x9f; }
    else if (b >= 0xee && b <= 0xef) need = 2;
    else if (b == 0xf0) { need = 3; lo = 0x90; }
    else if (b >= 0xf1 && b <= 0xf3) need = 3;
    else if (b == 0xf4) { need = 3; hi = 0x8f; }
    else {
        *valid = false; /* 80..C1, F5..FF: never start a character */
        return 1;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= len) break;
        unsigned char c = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (c < l || c > h) break;
    }
    if (i <= need) *valid = false; /* the maximal subpart: bytes [0, i) */
    return i;
}

bool modattn__utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* ASCII fast path, 8 bytes at a time */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= len) break;
        bool ok;
        i += modattn__utf8_next(p + i, len - i, &ok);
        if (!ok) return false;
    }
    return true;
}

char *modattn__utf8_sanitize(const char *s, size_t len, size_t *out_len) {
    /* each replaced byte becomes at most 3 bytes */
    if (len > (SIZE_MAX - 1) / 3) {
        modattn__error(MODATTN_ENOMEM, "utf8_sanitize: %zu bytes is too long", len);
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        bool ok;
        size_t k = modattn__utf8_next(p + i, len - i, &ok);
        if (!ok) bad += 3;
        i += k;
    }
    char *out = modattn__malloc(len + bad + 1, MODATTN_MEM_OTHER);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        bool ok;
        size_t k = modattn__utf8_next(p + i, len - i, &ok);
        if (ok) {
            memcpy(out + o, p + i, k);
            o += k;
        } else {
            out[o++] = (char)0xef;
            out[o++] = (char)0xbf;
            out[o++] = (char)0xbd;
        }
        i += k;
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

/* ------------------------------------------------------------------ UTF-16 with a BOM */

int modattn__utf16_bom(const void *s, size_t len) {
    const unsigned char *p = s;
    if (!p || len < 2) return 0;
    if (p[0] == 0xff && p[1] == 0xfe) return 1;
    if (p[0] == 0xfe && p[1] == 0xff) return 2;
    return 0;
}

static size_t put_utf8(char *o, uint32_t c) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

size_t modattn__utf16_decode(const unsigned char *p, size_t len, bool big_endian, char *out) {
    size_t o = 0, i = 0;
    const int hi = big_endian ? 0 : 1, lo = big_endian ? 1 : 0;
    while (i + 2 <= len) {
        uint32_t u = (uint32_t)p[i + hi] << 8 | p[i + lo];
        i += 2;
        if (u >= 0xd800 && u <= 0xdbff && i + 2 > len) {
            i = len; /* a high surrogate cut by the end, with or without an odd byte: one U+FFFD */
            o += put_utf8(out + o, 0xfffd);
            break;
        }
        if (u >= 0xd800 && u <= 0xdbff) {
            uint32_t v = (uint32_t)p[i + hi] << 8 | p[i + lo];
            if (v >= 0xdc00 && v <= 0xdfff) {
                i += 2;
                o += put_utf8(out + o, 0x10000 + ((u - 0xd800) << 10) + (v - 0xdc00));
                continue;
            }
        }
        /* an unpaired surrogate is one U+FFFD; the unit after it is read on its own */
        o += put_utf8(out + o, u >= 0xd800 && u <= 0xdfff ? 0xfffd : u);
    }
    if (i < len) o += put_utf8(out + o, 0xfffd); /* an odd last byte */
    return o;
}

char *modattn__utf16_to_utf8(const char *s, size_t len, size_t *out_len) {
    int bom = modattn__utf16_bom(s, len);
    if (!bom) {
        modattn__error(MODATTN_EINVAL, "utf16_to_utf8: no UTF-16 byte order mark");
        return NULL;
    }
    len -= 2;
    /* a 2-byte unit becomes at most 3 bytes, a 4-byte pair 4, an odd last byte 3 */
    if (len / 2 > (SIZE_MAX - 8) / 3) {
        modattn__error(MODATTN_ENOMEM, "utf16_to_utf8: %zu bytes is too long", len);
        return NULL;
    }
    char *out = modattn__malloc(len / 2 * 3 + 4, MODATTN_MEM_OTHER);
    if (!out) return NULL;
    size_t o = modattn__utf16_decode((const unsigned char *)s + 2, len, bom == 2, out);
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}
