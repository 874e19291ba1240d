/* pipeline/chunk.c — cutting a document's text into overlapping windows of word pieces.
 *
 * The text is tokenised one window at a time (window + 1 pieces, with byte offsets), so memory
 * stays O(window) whatever the document's size. A window starts on a piece that begins a word (not
 * a "##" continuation), so that a chunk tokenised on its own gives the same pieces it had inside
 * the document, and it ends before a word that the window would cut, when that costs less than
 * half the window. */
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/tokenizer.h"

static bool continues_word(const modattn_tokenizer *t, int32_t id) {
    const char *s = modattn_tokenizer_token(t, id);
    return s && s[0] == '#' && s[1] == '#' && s[2] != '\0';
}

int modattn_chunk_text(const modattn_tokenizer *tok, const char *text, size_t len, size_t window,
                       size_t overlap, modattn_chunk **out, size_t *n) {
    if (!out || !n) return modattn_error(MODATTN_EINVAL, "modattn_chunk_text: NULL argument");
    *out = NULL;
    *n = 0;
    if (!tok || (!text && len))
        return modattn_error(MODATTN_EINVAL, "modattn_chunk_text: NULL argument");
    if (window == 0 || overlap >= window || window > (1u << 20))
        return modattn_error(MODATTN_EINVAL,
                             "chunking: the overlap (%zu) must be smaller than the window (%zu)",
                             overlap, window);
    int32_t *ids = modattn_malloc((window + 1) * sizeof *ids, MODATTN_MEM_OTHER);
    modattn_token_offset *offs = modattn_malloc((window + 1) * sizeof *offs, MODATTN_MEM_OTHER);
    modattn_chunk *chunks = NULL;
    size_t nchunks = 0, cap = 0;
    int st = 0;
    if (!ids || !offs) {
        st = modattn_mem_last_status();
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
        if (nchunks == cap) {
            size_t nc = cap ? cap * 2 : 16;
            modattn_chunk *c = modattn_realloc(chunks, nc * sizeof *c, MODATTN_MEM_OTHER);
            if (!c) {
                st = modattn_mem_last_status();
                goto done;
            }
            chunks = c;
            cap = nc;
        }
        chunks[nchunks++] = (modattn_chunk){pos + offs[0].start, pos + offs[m - 1].end, m};
        if (got <= window) break; /* this window reached the end of the text */
        /* the next window: `m - overlap` pieces on, moved to a word start (forward first, then
         * backward; a word longer than the whole window is cut where the stride falls) */
        size_t stride = m > overlap ? m - overlap : 1;
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
