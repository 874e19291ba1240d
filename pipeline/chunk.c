/* pipeline/chunk.c — cutting a document's text into overlapping windows of word pieces.
 *
 * The text is tokenised one window at a time (window + 1 pieces, with byte offsets), so memory
 * stays O(window) whatever the document's size. A window starts on a piece that begins a word (not
 * a "##" continuation), so that a chunk tokenised on its own gives the same pieces it had inside
 * the document, and it ends before a word that the window would cut, when that costs less than
 * half the window. A chunk never spans more than MODATTN_CHUNK_MAX_BYTES: a window that would (a
 * stretch of blank space between pieces, words of [UNK]) ends at the last piece that fits, and one
 * piece longer than that (a single [UNK] word of megabytes) is cut at the cap, so that what is
 * stored and shown per chunk stays bounded whatever the file holds. */
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

static bool continues_word(const modattn_tokenizer *t, int32_t id) {
    const char *s = modattn_tokenizer_token(t, id);
    return s && s[0] == '#' && s[1] == '#' && s[2] != '\0';
}

int modattn_chunk_text(const modattn_tokenizer *tok, const char *text, size_t len, size_t window,
                       size_t overlap, modattn_chunk **out, size_t *n) {
    if (!out || !n) return modattn__error(MODATTN_EINVAL, "modattn_chunk_text: NULL argument");
    *out = NULL;
    *n = 0;
    if (!tok || (!text && len))
        return modattn__error(MODATTN_EINVAL, "modattn_chunk_text: NULL argument");
    if (window == 0 || overlap >= window || window > (1u << 20))
        return modattn__error(MODATTN_EINVAL,
                             "chunking: the overlap (%zu) must be smaller than the window (%zu)",
                             overlap, window);
    int32_t *ids = modattn__malloc((window + 1) * sizeof *ids, MODATTN_MEM_OTHER);
    modattn_token_offset *offs = modattn__malloc((window + 1) * sizeof *offs, MODATTN_MEM_OTHER);
    modattn_chunk *chunks = NULL;
    size_t nchunks = 0, cap = 0;
    int st = 0;
    if (!ids || !offs) {
        st = modattn__mem_last_status();
        goto done;
    }
    size_t pos = 0;
    while (pos < len) {
        size_t got = 0;
        st = modattn_tokenize_ex(tok, text + pos, len - pos, MODATTN_TOKENIZE_NO_SPECIALS, ids,
                                 offs, window + 1, &got);
        if (st) goto done;
        if (got == 0) break;
        size_t m = got < window ? got : window;
        /* don't cut the word that continues past the window, if that keeps half the window */
        if (got > window && continues_word(tok, ids[window])) {
            size_t e = window - 1;
            while (e > window / 2 && continues_word(tok, ids[e])) e--;
            if (e > window / 2) m = e;
        }
        size_t cstart = pos + offs[0].start, cend = pos + offs[m - 1].end;
        size_t ov = overlap;
        bool capped = false, one_long = false;
        if (cend - cstart > MODATTN_CHUNK_MAX_BYTES) {
            capped = true;
            size_t mm = m;
            while (mm > 1 && offs[mm - 1].end - offs[0].start > MODATTN_CHUNK_MAX_BYTES) mm--;
            if (offs[mm - 1].end - offs[0].start <= MODATTN_CHUNK_MAX_BYTES) {
                /* end before a word the cap would cut, if one begins inside */
                size_t e = mm;
                while (e > 1 && continues_word(tok, ids[e])) e--;
                if (!continues_word(tok, ids[e])) mm = e;
                ov = overlap * mm / m; /* the overlap in proportion */
                m = mm;
                cend = pos + offs[m - 1].end;
            } else { /* one piece over the cap: its first bytes, cut on a character boundary */
                m = 1;
                one_long = true;
                cend = cstart + MODATTN_CHUNK_MAX_BYTES;
                while (cend > cstart + 1 && ((unsigned char)text[cend] & 0xc0) == 0x80) cend--;
            }
        }
        if (nchunks == cap) {
            size_t nc = cap ? cap * 2 : 16;
            modattn_chunk *c = modattn__realloc(chunks, nc * sizeof *c, MODATTN_MEM_OTHER);
            if (!c) {
                st = modattn__mem_last_status();
                goto done;
            }
            chunks = c;
            cap = nc;
        }
        chunks[nchunks++] = (modattn_chunk){cstart, cend, m};
        if (got <= window && !capped) break; /* this window reached the end of the text */
        if (one_long) { /* the next window starts after that word */
            pos += offs[0].end;
            continue;
        }
        /* the next window: `m - overlap` pieces on, moved to a word start (forward first, then
         * backward; a word longer than the whole window is cut where the stride falls) */
        size_t stride = m > ov ? m - ov : 1;
        size_t s = stride;
        while (s <= m && continues_word(tok, ids[s])) s++;
        if (s > m) {
            s = stride;
            while (s > 1 && continues_word(tok, ids[s])) s--;
            if (continues_word(tok, ids[s])) s = stride;
        }
        size_t next = pos + offs[s].start;
        if (next <= pos) next = pos + offs[m - 1].end; /* always move on */
        pos = next;
    }
    *out = chunks;
    *n = nchunks;
    chunks = NULL;
done:
    modattn_free(chunks);
    modattn_free(ids);
    modattn_free(offs);
    return st;
}
