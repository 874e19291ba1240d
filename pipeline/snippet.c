/* pipeline/snippet.c — which window of a result's chunk is its snippet (issue 40: results people
 * trust). One code path for every surface: the library sets modattn_search_result.snippet_start /
 * snippet_end, and the CLI (text and JSON), the server's /search and Python show that range.
 *
 * The candidates are windows of at most MODATTN_SNIPPET_BYTES: the chunk cut at sentence and line
 * starts (so that a chunk found by meaning alone can show the passage that answers), and windows
 * that begin a little before each marked word (the words of the query that carry information:
 * stop words and words most chunks hold are never marked). The choice, in order: the most distinct
 * marked words; then, for a chunk no query word marks (found by meaning alone), the window nearest
 * the query by meaning (the meaning weight, for every such chunk among the first
 * MODATTN_SNIPPET_MEANING_RESULTS results); then the marked words nearest together; then the most
 * marks; then the earliest.
 *
 * The meaning weight is a static proxy: the cosine of the mean of the model's input word
 * embeddings (its embedding table, no transformer layer; model/internal_static.h) over the
 * window's word pieces with the same mean over the query's. Microseconds a window, so every
 * candidate window is weighed. Measured against the encoder (bench/results/snippet_quality.md):
 * the encoder on at most 4 windows of each of the first 5 results kept the answering sentence in
 * 59% of meaning-only results (34% without the weight) at +81..187 ms a search; the proxy on every
 * window 47% at +2 ms. Deterministic: a window's mean depends on its text alone, so a query gives
 * the same snippet alone or in a batch, on every device (the table is the host's copy). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/internal_static.h"
#include "pipeline/internal_search.h"

static bool is_space(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* A span's word as a key for "distinct": ASCII letters folded (other bytes as they are). */
static void word_key(const char *t, const modattn_text_span *sp, char *key, size_t cap) {
    size_t n = sp->end - sp->start < cap - 1 ? sp->end - sp->start : cap - 1;
    for (size_t i = 0; i < n; i++) {
        const char c = t[sp->start + i];
        key[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    key[n] = '\0';
}

/* The window [from, from + MODATTN_SNIPPET_BYTES) cut to the text and to a character's end, with
 * its marked words counted (spans sorted by start). */
static modattn_snippet_window window_at(const char *t, size_t len, size_t from, const modattn_text_span *sp, size_t nsp) {
    modattn_snippet_window w = {.start = from, .end = from + MODATTN_SNIPPET_BYTES < len ? from + MODATTN_SNIPPET_BYTES : len};
    while (w.end < len && ((unsigned char)t[w.end] & 0xc0) == 0x80) w.end++;
    char keys[16][64];
    size_t first = SIZE_MAX, last = 0;
    for (size_t j = 0; j < nsp; j++) {
        if (sp[j].start < from || sp[j].end > w.end || sp[j].start >= sp[j].end) continue;
        char k[64];
        word_key(t, &sp[j], k, sizeof k);
        bool seen = false;
        for (size_t x = 0; x < w.distinct && !seen; x++) seen = strcmp(keys[x], k) == 0;
        if (!seen && w.distinct < 16) memcpy(keys[w.distinct++], k, sizeof k);
        w.marks++;
        if (first == SIZE_MAX) first = sp[j].start;
        if (!seen) last = sp[j].end;
    }
    w.spread = first == SIZE_MAX ? 0 : last - first;
    return w;
}

/* p begins a sentence: a word's first byte after whitespace that follows . ! ? : or ;, or holds a
 * blank line, or a newline before a list item or heading (- * # or a digit). A lone newline of
 * wrapped text does not. */
static bool sentence_start(const char *t, size_t p) {
    if (p == 0) return true;
    if (is_space((unsigned char)t[p]) || !is_space((unsigned char)t[p - 1])) return false;
    size_t q = p, newlines = 0;
    while (q > 0 && is_space((unsigned char)t[q - 1])) newlines += t[--q] == '\n';
    if (newlines >= 2 || (newlines == 1 && (strchr("-*#", t[p]) || (t[p] >= '0' && t[p] <= '9')))) return true;
    return q > 0 && strchr(".!?:;", t[q - 1]) != NULL;
}

size_t modattn__snippet_candidates(const char *t, size_t len, const modattn_text_span *sp, size_t nsp,
                                  modattn_snippet_window *w, size_t cap) {
    if (!t || !w || cap == 0) return 0;
    size_t n = 0;
    const size_t B = MODATTN_SNIPPET_BYTES;
    if (len <= B) {
        w[n++] = window_at(t, len, 0, sp, nsp);
        return n;
    }
    /* a window at every sentence or line start at least gap bytes after the previous one (where
     * none comes for two thirds of a window: at a word's start; for a whole window: anywhere, on a
     * character's first byte), until one reaches the end; a huge text: spread evenly, at most
     * cap / 2 of them */
    const size_t tiles = cap / 2 > 0 ? cap / 2 : 1;
    size_t gap = B / 4;
    if (len / tiles > gap) gap = len / tiles;
    w[n++] = window_at(t, len, 0, sp, nsp);
    size_t last = 0;
    for (size_t p = gap; p < len && n < tiles && w[n - 1].end < len; p++) {
        if (p - last < gap || ((unsigned char)t[p] & 0xc0) == 0x80) continue;
        const bool word = is_space((unsigned char)t[p - 1]) && !is_space((unsigned char)t[p]);
        if (sentence_start(t, p) || (word && p - last >= B * 2 / 3) || p - last >= B) {
            w[n++] = window_at(t, len, p, sp, nsp);
            last = p;
        }
    }
    /* a window that begins a little before each marked word (at a word's start when one is near) */
    for (size_t i = 0; i < nsp && n < cap; i++) {
        if (sp[i].end > len || sp[i].start >= sp[i].end) continue;
        size_t from = 0;
        if (sp[i].start > 40) {
            from = sp[i].start - 40;
            for (size_t k = 0; k < 24 && from + k < sp[i].start; k++)
                if (t[from + k] == ' ' || t[from + k] == '\n') {
                    from += k + 1;
                    break;
                }
            while (from > 0 && ((unsigned char)t[from] & 0xc0) == 0x80) from--;
        }
        bool dup = false;
        for (size_t x = 0; x < n && !dup; x++) dup = w[x].start == from;
        if (!dup) w[n++] = window_at(t, len, from, sp, nsp);
    }
    return n;
}

size_t modattn__snippet_contenders(const modattn_snippet_window *w, size_t nw, size_t *idx, size_t max) {
    size_t best = 0, tied[MODATTN_SNIPPET_MAX_WINDOWS], nt = 0, n = 0;
    for (size_t i = 0; i < nw; i++)
        if (w[i].distinct > best) best = w[i].distinct;
    for (size_t i = 0; i < nw && nt < MODATTN_SNIPPET_MAX_WINDOWS; i++) /* tied, by start */
        if (w[i].distinct == best) {
            size_t j = nt++;
            for (; j > 0 && w[tied[j - 1]].start > w[i].start; j--) tied[j] = tied[j - 1];
            tied[j] = i;
        }
    if (nt <= max) {
        memcpy(idx, tied, nt * sizeof *idx);
        return nt;
    }
    /* more than max: first those that follow one another without overlapping (they cover the
     * chunk from its start: every sentence lies in one of them), then the others by start */
    bool taken[MODATTN_SNIPPET_MAX_WINDOWS] = {false};
    size_t end = 0;
    for (size_t j = 0; j < nt && n < max; j++)
        if (w[tied[j]].start >= end) {
            idx[n++] = tied[j];
            taken[j] = true;
            end = w[tied[j]].end;
        }
    for (size_t j = 0; j < nt && n < max; j++)
        if (!taken[j]) idx[n++] = tied[j];
    return n;
}

size_t modattn__snippet_pick(const modattn_snippet_window *w, const size_t *idx, size_t nidx, const float *cos) {
    size_t b = 0;
    for (size_t j = 1; j < nidx; j++) {
        const modattn_snippet_window *x = &w[idx[j]], *y = &w[idx[b]];
        int c = 0; /* > 0: x is better */
        if (x->distinct != y->distinct) c = x->distinct > y->distinct ? 1 : -1;
        else if (cos && cos[j] != cos[b] && !isnan(cos[j]) && !isnan(cos[b])) c = cos[j] > cos[b] ? 1 : -1;
        else if (x->spread != y->spread && x->distinct > 0) c = x->spread < y->spread ? 1 : -1;
        else if (x->marks != y->marks) c = x->marks > y->marks ? 1 : -1;
        else if (x->start != y->start) c = x->start < y->start ? 1 : -1;
        if (c > 0) b = j;
    }
    return nidx ? idx[b] : 0;
}

static double cosine(const float *a, const float *b, size_t dim) {
    double dot = 0, aa = 0, bb = 0;
    for (size_t d = 0; d < dim; d++) {
        dot += (double)a[d] * b[d];
        aa += (double)a[d] * a[d];
        bb += (double)b[d] * b[d];
    }
    return aa > 0 && bb > 0 ? dot / sqrt(aa * bb) : 0.0;
}

int modattn__search_snippets(const modattn_model *model, const char *query, size_t qlen, modattn_search_result *res,
                            size_t n) {
    enum { CAP = MODATTN_SNIPPET_MAX_WINDOWS };
    const size_t dim = modattn__model_static_dim(model);
    const bool meaning = model && query && dim > 0;
    modattn_snippet_window *w = modattn__malloc(CAP * sizeof *w, MODATTN_MEM_OTHER);
    float *qm = meaning ? modattn__malloc(2 * dim * sizeof *qm, MODATTN_MEM_OTHER) : NULL;
    float *wm = qm ? qm + dim : NULL;
    bool have_q = false;
    int st = 0;
    if (!w || (meaning && !qm)) {
        st = modattn__mem_last_status();
        goto done;
    }
    uint64_t tr = 0;
    size_t weighed = 0;
    for (size_t i = 0; i < n; i++) {
        modattn_search_result *r = &res[i];
        const char *t = r->chunk.text ? r->chunk.text : "";
        const size_t len = strlen(t);
        const size_t nw = modattn__snippet_candidates(t, len, r->spans, r->nspans, w, CAP);
        size_t idx[CAP];
        const size_t ni = modattn__snippet_contenders(w, nw, idx, CAP);
        size_t pick = modattn__snippet_pick(w, idx, ni, NULL);
        /* meaning decides only where words cannot: a chunk none of the query's words mark (found by
         * meaning alone), and only where more than one window contends */
        if (meaning && i < MODATTN_SNIPPET_MEANING_RESULTS && nw && w[pick].distinct == 0 && ni >= 2) {
            if (!have_q) {
                tr = modattn__trace_begin();
                if ((st = modattn__model_static_mean(model, query, qlen, qm, NULL))) goto done;
                have_q = true;
            }
            float cos[CAP];
            for (size_t j = 0; j < ni; j++) {
                if ((st = modattn__model_static_mean(model, t + w[idx[j]].start, w[idx[j]].end - w[idx[j]].start, wm,
                                                     NULL))) {
                    st = modattn__error_prefix(st, "weighing the snippets' windows");
                    goto done;
                }
                cos[j] = (float)cosine(qm, wm, dim);
            }
            weighed += ni;
            pick = modattn__snippet_pick(w, idx, ni, cos);
        }
        r->snippet_start = nw ? w[pick].start : 0;
        r->snippet_end = nw ? w[pick].end : len;
    }
    if (tr) {
        char shape[48];
        snprintf(shape, sizeof shape, "windows=%zu", weighed);
        modattn__trace_end(tr, "search.snippets", "static", shape, 0, 0);
    }
done:
    modattn_free(w);
    modattn_free(qm);
    return st;
}
