/* pipeline/chunk.c — cutting a document's text into overlapping windows of word pieces.
 *
 * The text is tokenised one window at a time (window + 1 pieces, with byte offsets), so memory
 * stays O(window) whatever the document's size. A window starts on a piece that begins a word (not
 * a "##" continuation), so that a chunk tokenised on its own gives the same pieces it had inside
 * the document, and it ends before a word that the window would cut, when that costs less than
 * half the window. A chunk never spans more than MODATTN_CHUNK_MAX_BYTES: a window that would (a
 * stretch of blank space between pieces, words of [UNK]) ends at the last piece that fits, and one
 * piece longer than that (a single [UNK] word of megabytes) is cut at the cap, so that what is
 * stored and shown per chunk stays bounded whatever the file holds.
 *
 * Cost. The tokenizer works through blocks it cuts at safe places about every 8 KiB and stops once
 * the window is full, so a window costs O(window + 8 KiB) on ordinary text. Where it finds no
 * safe place (a Unigram/SentencePiece piece without spaces: long Chinese or Japanese text;
 * byte-level BPE text with no "\n" before an ASCII letter; letters that begin a single_word added
 * token) its block is the whole stretch, and tokenising from each window's start ran over all of
 * it again: O(n) per window, O(n^2 / window) per document (13 s for 480 KB of Chinese, over 20
 * minutes for 5 MB). Unigram's Viterbi also runs over a whole word, so a word of 20 KB between
 * spaces cost the rest of that word per window (60 of them: 9.6 s against 0.14 s to tokenise). So
 * when the window's last piece falls in a block of modattn__tk_long_block(tok) bytes or more (32
 * KiB; over 16 KiB for Unigram, whose blocks are that long only around 8 KiB or more without a
 * space it may cut at, or where it may cut nowhere and the text is one block),
 * modattn__tokenize_pieces returns every piece of that block, and the following
 * windows are taken from those pieces (the cache) for as long as a whole window + 1 of them is
 * left (or they reach the end of the text), instead of tokenising again from each window's start.
 * Linear time; the memory is that block's pieces, as the tokenizer's own for that block already
 * was. Text the tokenizer cuts at least every 8 KiB never makes such a block: its chunks are exactly
 * what they were.
 *
 * What changes inside such a block: the windows are windows of one tokenisation, the one from
 * where the cache began (the document's own when it begins at the text's start), where they were
 * each the start of a fresh tokenisation from the window's first byte. Their bytes still begin
 * and end on that tokenisation's pieces, hold at most `window` of them, overlap by `overlap`
 * (moved to a word start the same way) and cover every piece. The two tokenisations differ only
 * where one that starts at the window's byte sees a text start: Unigram puts its prefix "▁"
 * there and may segment the first word differently, byte-level BPE may do likewise with the
 * first pre-token, and a single_word or lstrip added token right there could match differently.
 * So a chunk tokenised on its own may have a piece or a few more than ntokens there (measured:
 * Unigram one, the leading "▁"; byte-level BPE up to 4; a byte-fallback Unigram up to about 15%,
 * against up to 6% before), where a fresh tokenisation could only differ at the chunk's end. The
 * only exact alternative, the fresh tokenisation from every window's start, needs the whole rest
 * of such a block each time (a Viterbi or BPE over one pre-token sees all of it): the quadratic
 * time this replaces. */
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/internal_tokenize.h"

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
    modattn__tk_pieces pc = {0};
    modattn_chunk *chunks = NULL;
    size_t nchunks = 0, cap = 0;
    int st = 0;
    /* the cache: pc holds every piece of the tokenisation from cpos up to cpos + creach (to the
     * end of the text when complete), from a long block; ci: the piece the next window starts on */
    bool cached = false, complete = false;
    size_t cpos = 0, ci = 0;
    size_t pos = 0;
    while (pos < len) {
        /* this window's pieces: ids[0, got), at bytes base + offs[k] of the text */
        const int32_t *ids;
        const modattn_token_offset *offs;
        size_t got, base;
        if (cached) {
            while (ci < pc.n && cpos + pc.offs[ci].start < pos) ci++; /* the first piece from pos */
            if (pc.n - ci <= window && !complete) cached = false; /* too few left: tokenise again */
        }
        if (!cached) {
            size_t reach = 0;
            st = modattn__tokenize_pieces(tok, text + pos, len - pos, window + 1, &pc, &reach);
            if (st) goto done;
            if (pc.n > window + 1) { /* a long block, all of its pieces: windows from them */
                cached = true;
                complete = reach == len - pos;
                cpos = pos;
                ci = 0;
            }
            ids = pc.ids;
            offs = pc.offs;
            got = pc.n < window + 1 ? pc.n : window + 1;
            base = pos;
        }
        if (cached) {
            ids = pc.ids + ci;
            offs = pc.offs + ci;
            got = pc.n - ci < window + 1 ? pc.n - ci : window + 1;
            base = cpos;
        }
        if (got == 0) break;
        size_t m = got < window ? got : window;
        /* don't cut the word that continues past the window, if that keeps half the window */
        if (got > window && continues_word(tok, ids[window])) {
            size_t e = window - 1;
            while (e > window / 2 && continues_word(tok, ids[e])) e--;
            if (e > window / 2) m = e;
        }
        size_t cstart = base + offs[0].start, cend = base + offs[m - 1].end;
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
                cend = base + offs[m - 1].end;
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
            pos = base + offs[0].end;
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
        size_t next = base + offs[s].start;
        if (next > pos) {
            if (cached) ci += s; /* on that piece, even where pieces share a start (byte fallback) */
        } else {
            next = base + offs[m - 1].end; /* always move on */
        }
        pos = next;
    }
    *out = chunks;
    *n = nchunks;
    chunks = NULL;
done:
    modattn_free(chunks);
    modattn__tk_pieces_free(&pc);
    return st;
}
