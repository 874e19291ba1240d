/* model/tokenizer_decode.c — ids back to text (modattn_tokenizer_decode): the tokenizer.json's
 * ByteLevel, WordPiece and Metaspace decoders, or none, as `tokenizers`' Tokenizer.decode applies them.
 * Used by the server's POST /detokenize and Python's Model.decode. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/tokenizer_internal.h"

/* GPT-2's bytes_to_unicode inverted: bytes 33..126, 161..172 and 174..255 are their own
 * character; the other 68 bytes, in order, are U+0100.. U+0143. Returns -1 for any other character. */
static int bytelevel_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp < 256 || cp > 0x143) return -1;
    uint32_t k = cp - 256; /* the k-th byte outside the ranges above */
    if (k < 33) return (int)k;           /* 0..32 */
    if (k < 33 + 34) return (int)(k + 94); /* 127..160 */
    return 173;                            /* k == 67 */
}

/* One token's bytes under ByteLevel into dst (room for tl bytes): its characters mapped back, or
 * the token itself when a character is outside the table. Returns the bytes written. */
static size_t bytelevel_token(const char *tok, size_t tl, char *dst) {
    const uint8_t *s = (const uint8_t *)tok;
    size_t w = 0;
    for (size_t i = 0; i < tl;) {
        uint32_t cp;
        const size_t k = modattn__tk_utf8_one(s, i, tl, &cp);
        const int b = bytelevel_byte(cp); /* U+FFFD (never in a token from JSON) is outside the table */
        if (b < 0) {
            memcpy(dst, tok, tl);
            return tl;
        }
        dst[w++] = (char)b;
        i += k;
    }
    return w;
}

static bool is_special(const modattn_tokenizer *t, int32_t id) {
    return t->special_bits && (t->special_bits[(size_t)id / 8] >> (id % 8) & 1u);
}

/* WordPiece's clean-up (transformers' clean_up_tokenization on the joined text): no space before
 * . ? ! , and in the contractions. In place on p[start, *n). */
static void wordpiece_cleanup(char *p, size_t start, size_t *n) {
    static const char *const glue[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    static const char *const with[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    for (size_t g = 0; g < sizeof glue / sizeof *glue; g++) {
        const size_t gl = strlen(glue[g]), wl = strlen(with[g]);
        size_t r = start, w = start;
        while (r < *n) {
            if (*n - r >= gl && memcmp(p + r, glue[g], gl) == 0) {
                memmove(p + w, with[g], wl);
                w += wl;
                r += gl;
            } else p[w++] = p[r++];
        }
        *n = w;
    }
    p[*n] = '\0';
}

int modattn_tokenizer_decode(const modattn_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char **out,
                             size_t *len) {
    if (!t || !out || (n && !ids))
        return modattn__error(MODATTN_EINVAL, "modattn_tokenizer_decode: NULL argument");
    *out = NULL;
    if (len) *len = 0;
    if (flags & ~MODATTN_DECODE_KEEP_SPECIALS)
        return modattn__error(MODATTN_EINVAL, "modattn_tokenizer_decode: unknown flags 0x%x", flags);
    if (t->decoder == TK_DEC_OTHER)
        return modattn__error(MODATTN_EUNSUPPORTED,
                              "modattn_tokenizer_decode: the tokenizer's decoder \"%s\" is not supported "
                              "(ByteLevel, WordPiece, Metaspace or none)",
                              t->dec_type);
    const bool skip = !(flags & MODATTN_DECODE_KEEP_SPECIALS);
    /* the joined tokens' size: the tokens plus a space between each */
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->nids)
            return modattn__error(MODATTN_EINVAL, "modattn_tokenizer_decode: ids[%zu] = %d is outside the vocabulary [0, %zu)",
                                  i, (int)ids[i], t->nids);
        if (t->tok_off[ids[i]] == TK_NONE) continue;
        total += (size_t)t->tok_len[ids[i]] + 1;
        if (total > SIZE_MAX / 4) return modattn__error(MODATTN_ERANGE, "modattn_tokenizer_decode: the text is too long");
    }
    /* ByteLevel: each byte may become U+FFFD (3 bytes) */
    const size_t cap = t->decoder == TK_DEC_BYTELEVEL ? total * 3 : total;
    char *raw = modattn__malloc(total, MODATTN_MEM_OTHER);
    char *res = t->decoder == TK_DEC_BYTELEVEL ? modattn__malloc(cap, MODATTN_MEM_OTHER) : raw;
    if (!raw || !res) {
        modattn_free(raw);
        if (res != raw) modattn_free(res);
        return modattn__error_prefix(modattn__mem_last_status(), "modattn_tokenizer_decode");
    }
    size_t w = 0, kept = 0;
    const size_t pl = strlen(t->dec_prefix);
    for (size_t i = 0; i < n; i++) {
        const int32_t id = ids[i];
        if (t->tok_off[id] == TK_NONE || (skip && is_special(t, id))) continue;
        const char *tok = t->slab + t->tok_off[id];
        size_t tl = t->tok_len[id];
        if (t->decoder == TK_DEC_BYTELEVEL) {
            w += bytelevel_token(tok, tl, raw + w);
        } else if (t->decoder == TK_DEC_METASPACE) { /* never longer than the token */
            for (size_t k = 0; k < tl;) {
                if (tl - k >= pl && memcmp(tok + k, t->dec_prefix, pl) == 0) {
                    if (kept || !t->dec_strip_first) raw[w++] = ' ';
                    k += pl;
                } else {
                    raw[w++] = tok[k++];
                }
            }
        } else {
            if (t->decoder == TK_DEC_WORDPIECE && kept && pl && tl >= pl && memcmp(tok, t->dec_prefix, pl) == 0) {
                tok += pl;
                tl -= pl;
            } else if (kept) {
                raw[w++] = ' ';
            }
            memcpy(raw + w, tok, tl);
            w += tl;
        }
        kept++;
    }
    raw[w] = '\0';
    if (t->decoder == TK_DEC_BYTELEVEL) {
        /* bytes -> UTF-8, lossy */
        size_t r = 0, o = 0;
        while (r < w) {
            uint32_t cp;
            const size_t k = modattn__tk_utf8_one((const uint8_t *)raw, r, w, &cp);
            if (cp == 0xFFFD && !(k == 3 && memcmp(raw + r, "\xEF\xBF\xBD", 3) == 0)) {
                memcpy(res + o, "\xEF\xBF\xBD", 3);
                o += 3;
            } else {
                memcpy(res + o, raw + r, k);
                o += k;
            }
            r += k;
        }
        res[o] = '\0';
        w = o;
        modattn_free(raw);
    } else if (t->decoder == TK_DEC_WORDPIECE && t->dec_cleanup) {
        wordpiece_cleanup(res, 0, &w);
    }
    *out = res;
    if (len) *len = w;
    return 0;
}
