/* tests/pipeline/test_snippet.c — the choice of a result's snippet (pipeline/snippet.c, issue 40:
 * results people trust): the window with the most distinct marked words even in the middle of a
 * chunk, the meaning weight choosing among windows (a chunk found by meaning alone shows its best
 * passage, not its start), marks that skip stop words (from a store's own keyword query), the same
 * choice every time, and bounds on a huge chunk with many marks. The meaning weight with a real
 * model (all-MiniLM-L6-v2, `make model`: fails, does not skip, without it): the static proxy (the
 * mean input word embedding, model/static_embed.c) against the checkpoint's own table, and the
 * window it picks, alone or in a batch; end to end by cli_snippet.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "model/encoder_internal.h"
#include "model/internal_static.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "pipeline/keywords_internal.h"
#include "pipeline/pipeline_internal.h"
#include "test_util.h"

#define MAXW MODATTN_SNIPPET_MAX_WINDOWS

/* spans of every occurrence of each word (whole words, ASCII case folded) in t, sorted */
static size_t spans_of(const char *t, const char *const *words, size_t nwords, modattn_text_span *sp, size_t cap) {
    size_t n = 0;
    const size_t len = strlen(t);
    for (size_t p = 0; p < len && n < cap; p++) {
        if (p > 0 && t[p - 1] != ' ' && t[p - 1] != '\n') continue;
        for (size_t w = 0; w < nwords; w++) {
            const size_t wl = strlen(words[w]);
            if (p + wl <= len && strncasecmp(t + p, words[w], wl) == 0 &&
                (p + wl == len || t[p + wl] == ' ' || t[p + wl] == '.' || t[p + wl] == ',')) {
                sp[n++] = (modattn_text_span){p, p + wl};
                break;
            }
        }
    }
    return n;
}

static size_t choose(const char *t, const modattn_text_span *sp, size_t nsp, const float *cos_by_start,
                     modattn_snippet_window *w, size_t *nw_out) {
    const size_t len = strlen(t);
    const size_t nw = modattn__snippet_candidates(t, len, sp, nsp, w, MAXW);
    size_t idx[MAXW];
    const size_t ni = modattn__snippet_contenders(w, nw, idx, MAXW);
    float cos[MAXW];
    for (size_t j = 0; j < ni && cos_by_start; j++) cos[j] = cos_by_start[w[idx[j]].start];
    if (nw_out) *nw_out = nw;
    return modattn__snippet_pick(w, idx, ni, cos_by_start ? cos : NULL);
}

/* A chunk of six sentences about other things with the passage that answers in the middle. */
static const char *chunk =
    "The lighthouse keeper lit the lamp at dusk and watched the ships go by on the grey water. "
    "The harbour master logged every ship in the ledger before the tide turned that evening. "
    "Gulls argued over the nets while the fishermen mended them on the quay by the old wall. "
    "The coffee shop on the corner closes at three on Sunday, and the owner roasts the beans herself. "
    "Further along, the market sold apples, pears and bread until the church bells rang noon. "
    "At night the town was quiet but for the wind in the rigging and the sea against the stones.";

static void test_words_in_the_middle(void) {
    static const char *const words[] = {"coffee", "shop", "Sunday", "ships"};
    modattn_text_span sp[64];
    const size_t nsp = spans_of(chunk, words, 4, sp, 64);
    CHECK(nsp == 4);
    modattn_snippet_window w[MAXW];
    size_t nw = 0;
    const size_t b = choose(chunk, sp, nsp, NULL, w, &nw);
    CHECK(nw > 2);
    const char *coffee = strstr(chunk, "coffee"), *sunday = strstr(chunk, "Sunday");
    CHECK_MSG(w[b].start > 0 && w[b].start <= (size_t)(coffee - chunk) &&
                  w[b].end >= (size_t)(sunday - chunk) + 6 && w[b].distinct == 3,
              "window [%zu, %zu) distinct %zu", w[b].start, w[b].end, w[b].distinct);
    CHECK(w[b].end - w[b].start <= MODATTN_SNIPPET_BYTES);
    /* a meaning weight does not outvote words: the same window with cosines that favour another */
    float cos[1024];
    for (size_t i = 0; i < sizeof cos / sizeof *cos; i++) cos[i] = i == 0 ? 0.9f : 0.1f;
    size_t b2 = choose(chunk, sp, nsp, cos, w, NULL);
    CHECK(w[b2].distinct == 3 && w[b2].start == w[b].start);
}

static void test_meaning_in_the_middle(void) {
    /* no marks (found by meaning alone): without cosines the chunk's start; with them the window
     * nearest the query, here the one that begins at the coffee shop's sentence */
    modattn_snippet_window w[MAXW];
    size_t nw = 0;
    CHECK(w[choose(chunk, NULL, 0, NULL, w, &nw)].start == 0);
    const size_t at = (size_t)(strstr(chunk, "The coffee shop") - chunk);
    float cos[1024];
    for (size_t i = 0; i < sizeof cos / sizeof *cos; i++) cos[i] = i == at ? 0.7f : 0.2f + 0.0001f * (float)i;
    bool tiled = false; /* the passage's sentence begins a candidate */
    modattn__snippet_candidates(chunk, strlen(chunk), NULL, 0, w, MAXW);
    for (size_t i = 0; i < nw; i++) tiled |= w[i].start == at;
    CHECK(tiled);
    const size_t b = choose(chunk, NULL, 0, cos, w, NULL);
    CHECK_MSG(w[b].start == at, "start %zu, not %zu", w[b].start, at);
    /* every candidate begins a sentence (the text's start or after ". ") */
    for (size_t i = 0; i < nw; i++) CHECK(w[i].start == 0 || (chunk[w[i].start - 1] == ' ' && chunk[w[i].start - 2] == '.'));
    /* at most 4 of more tied contenders: those that follow one another from the chunk's start
     * without overlapping come first, so every sentence begins in one of them */
    char twice[2048]; /* (the chunk twice: about 1,090 bytes, twelve sentences) */
    snprintf(twice, sizeof twice, "%s %s", chunk, chunk);
    const size_t nw2 = modattn__snippet_candidates(twice, strlen(twice), NULL, 0, w, MAXW);
    size_t idx[4];
    const size_t ni = modattn__snippet_contenders(w, nw2, idx, 4);
    CHECK(nw2 > 4 && ni == 4);
    for (size_t p = 0; p < strlen(twice); p++) { /* every sentence begins in one of them */
        if (p > 0 && !(twice[p - 1] == ' ' && twice[p - 2] == '.')) continue;
        bool in = false;
        for (size_t j = 0; j < ni; j++) in |= w[idx[j]].start <= p && p < w[idx[j]].end;
        CHECK_MSG(in, "the sentence at %zu is in no window weighed", p);
    }
    /* a short chunk is one window, the whole of it */
    const char *s = "A short chunk.";
    CHECK(modattn__snippet_candidates(s, strlen(s), NULL, 0, w, MAXW) == 1 && w[0].start == 0 && w[0].end == strlen(s));
}

static void test_deterministic(void) {
    static const char *const words[] = {"the", "ship", "ships", "sea"};
    modattn_text_span sp[128];
    const size_t nsp = spans_of(chunk, words, 4, sp, 128);
    modattn_snippet_window w1[MAXW], w2[MAXW];
    float cos[1024];
    for (size_t i = 0; i < sizeof cos / sizeof *cos; i++) cos[i] = 0.5f; /* all tied: the earliest */
    size_t n1 = 0, n2 = 0;
    const size_t b1 = choose(chunk, sp, nsp, cos, w1, &n1), b2 = choose(chunk, sp, nsp, cos, w2, &n2);
    CHECK(n1 == n2 && memcmp(w1, w2, n1 * sizeof *w1) == 0 && b1 == b2);
    for (size_t i = 0; i < n1; i++)
        if (w1[i].distinct == w1[b1].distinct && w1[i].spread == w1[b1].spread && w1[i].marks == w1[b1].marks)
            CHECK(w1[i].start >= w1[b1].start);
}

static void test_huge(void) {
    /* 64 KiB without a sentence start, then 64 KiB of short sentences, each with marks: bounded
     * candidates, each at most a window, spread over the whole text */
    const size_t len = MODATTN_CHUNK_MAX_BYTES;
    char *t = malloc(len + 1);
    if (!t) return;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < len; i++) t[i] = pass == 0 ? 'x' : "Ship at sea. "[i % 13];
        t[len] = '\0';
        static const char *const words[] = {"Ship", "sea"};
        const size_t cap = 20000;
        modattn_text_span *sp = malloc(cap * sizeof *sp);
        size_t nsp = pass == 0 ? 0 : spans_of(t, words, 2, sp, cap);
        CHECK(pass == 0 || nsp > 10000);
        modattn_snippet_window w[MAXW];
        const size_t nw = modattn__snippet_candidates(t, len, sp, nsp, w, MAXW);
        CHECK(nw >= MAXW / 2 - 1 && nw <= MAXW);
        size_t last_tile = 0;
        for (size_t i = 0; i < nw; i++) {
            CHECK(w[i].start < w[i].end && w[i].end <= len && w[i].end - w[i].start <= MODATTN_SNIPPET_BYTES + 3);
            if (i < MAXW / 2 && w[i].start > last_tile) last_tile = w[i].start;
        }
        CHECK_MSG(last_tile > len * 9 / 10, "the tiling stops at %zu of %zu", last_tile, len);
        size_t idx[MAXW]; /* every contender is weighed by meaning: at most the candidates */
        const size_t ni = modattn__snippet_contenders(w, nw, idx, MAXW);
        CHECK(ni >= 1 && ni <= nw);
        free(sp);
    }
    free(t);
}

/* The marks a store gives for a query that has stop words: none on them; the snippet of a result
 * found by words is the window of the words that matter, the same as the pure choice, and the
 * same again (alone or among other results). */
static void test_store_marks(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/snippet.db", dir);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(path, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return;
    modattn_store_model m = {"m", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &m) == 0);
    static const char *const others[] = {"The lamp on the hill.", "When the river floods, the meadow drowns.",
                                         "The garden does not close on Sunday."};
    float vec[4] = {1, 0, 0, 0};
    int64_t chunk_id = 0;
    for (int i = 0; i < 4; i++) {
        char p[64];
        snprintf(p, sizeof p, "/t/doc%d.txt", i);
        const char *text = i == 0 ? chunk : others[i - 1];
        modattn_store_doc d = {.path = p, .hash = (uint64_t)i, .kind = "text", .nchunks = 1};
        CHECK(modattn__store_begin(s) == 0 && modattn__store_put_document(s, &d) == 0);
        modattn_store_chunk_in c = {0, 0, (int64_t)strlen(text), 1, 0, 5, text, strlen(text)};
        CHECK(modattn__store_put_chunk(s, d.id, &c, vec, 4) == 0 && modattn__store_commit(s) == 0);
    }
    char *fts = NULL, *marks = NULL;
    modattn__kw_query_info info;
    const char *q = "when does the coffee shop close on Sunday";
    CHECK(modattn__store_keyword_query_info(s, q, strlen(q), &fts, &marks, &info) == 0 && marks);
    double sc[4];
    int64_t ids[4];
    size_t nk = 0; /* found by words: the long chunk and the garden's ("close", "Sunday") */
    CHECK(fts && modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &nk) == 0 && nk == 2);
    for (size_t i = 0; i < nk; i++) {
        modattn_store_chunk ch;
        if (modattn__store_get_chunk(s, ids[i], &ch) == 0) {
            if (ch.text && strcmp(ch.text, chunk) == 0) chunk_id = ids[i];
            modattn__store_chunk_clear(&ch);
        }
    }
    modattn_search_result r[2];
    memset(r, 0, sizeof r);
    CHECK(chunk_id > 0 && modattn__store_get_chunk(s, chunk_id, &r[0].chunk) == 0);
    CHECK(marks && modattn__store_keyword_spans(s, marks, chunk_id, &r[0].spans, &r[0].nspans) == 0);
    CHECK(r[0].nspans >= 3);
    for (size_t i = 0; i < r[0].nspans; i++) {
        char word[32];
        const size_t n = r[0].spans[i].end - r[0].spans[i].start;
        snprintf(word, sizeof word, "%.*s", (int)(n < 31 ? n : 31), chunk + r[0].spans[i].start);
        CHECK_MSG(strcasecmp(word, "on") && strcasecmp(word, "the") && strcasecmp(word, "when") &&
                      strcasecmp(word, "does"), "a stop word marked: %s", word);
    }
    CHECK(modattn__search_snippets(NULL, NULL, 0, r, 1) == 0);
    const size_t a0 = r[0].snippet_start, e0 = r[0].snippet_end;
    const size_t coffee = (size_t)(strstr(chunk, "coffee") - chunk);
    CHECK_MSG(a0 > 0 && a0 <= coffee && e0 >= coffee + 20 && e0 - a0 <= MODATTN_SNIPPET_BYTES, "[%zu, %zu)", a0, e0);
    /* alone or second of two: the same window */
    r[1] = r[0];
    memset(&r[0], 0, sizeof r[0]);
    r[0].chunk.text = (char *)"The lamp on the hill.";
    CHECK(modattn__search_snippets(NULL, NULL, 0, r, 2) == 0);
    CHECK(r[1].snippet_start == a0 && r[1].snippet_end == e0 && r[0].snippet_start == 0 && r[0].snippet_end == 21);
    modattn__store_chunk_clear(&r[1].chunk);
    modattn_free(r[1].spans);
    modattn_free(fts);
    modattn_free(marks);
    modattn_store_close(s);
}

#define MINILM ".models/all-MiniLM-L6-v2"

/* the static proxy: the mean of the checkpoint's word-embedding rows of the text's word pieces,
 * lower-cased, without [CLS]/[SEP]; then the window it weighs nearest a query, alone or in a batch */
static void test_static_meaning(void) {
    modattn_ctx *ctx = NULL;
    modattn_model *m = NULL;
    modattn_ctx_options co;
    memset(&co, 0, sizeof co);
    co.threads = 1;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    CHECK_MSG(ctx && modattn_model_load(ctx, MINILM, &m) == 0, "load %s: %s", MINILM, modattn_last_error());
    if (!m) {
        modattn_ctx_free(ctx);
        return;
    }
    const size_t H = modattn__model_static_dim(m);
    CHECK(H == 384);
    const float *tab = NULL; /* read here by name from the safetensors file, not through the encoder */
    CHECK(modattn__model_tensor(m, "embeddings.word_embeddings.weight", 30522, 384, &tab) == 0 && tab);
    int32_t ids[16];
    size_t nid = 0, ntok = 9;
    CHECK(modattn_model_tokenize(m, "coffee shop", 11, ids, 16, &nid) == 0 && nid == 4);
    float got[384], want[384];
    /* one word piece: its row, bit for bit (upper case folded as embed folds it) */
    CHECK(modattn__model_static_mean(m, "COFFEE", 6, got, &ntok) == 0 && ntok == 1);
    CHECK_MSG(memcmp(got, tab + (size_t)ids[1] * H, H * sizeof *got) == 0, "the mean of one word piece is not its row");
    /* two: the mean of the two rows ([CLS] and [SEP] left out) */
    CHECK(modattn__model_static_mean(m, "coffee shop", 11, got, &ntok) == 0 && ntok == 2);
    double worst = 0;
    for (size_t k = 0; k < H; k++) {
        want[k] = (float)(((double)tab[(size_t)ids[1] * H + k] + tab[(size_t)ids[2] * H + k]) / 2);
        if (fabs(got[k] - want[k]) > worst) worst = fabs(got[k] - want[k]);
    }
    CHECK_MSG(worst <= 1e-7, "mean of two rows off by %g", worst);
    /* nothing to average: zeros */
    got[0] = 1;
    CHECK(modattn__model_static_mean(m, "", 0, got, &ntok) == 0 && ntok == 0 && got[0] == 0 && got[H - 1] == 0);
    CHECK(modattn__model_static_mean(NULL, "x", 1, got, NULL) == MODATTN_EINVAL);

    /* a chunk found by meaning alone (no marks): the window of the passage that answers */
    const char *q = "When is the coffee shop open on Sunday?";
    const size_t at = (size_t)(strstr(chunk, "The coffee shop") - chunk);
    modattn_search_result r[3];
    memset(r, 0, sizeof r);
    r[0].chunk.text = (char *)chunk;
    CHECK(modattn__search_snippets(m, q, strlen(q), r, 1) == 0);
    CHECK_MSG(r[0].snippet_start == at && r[0].snippet_end - r[0].snippet_start <= MODATTN_SNIPPET_BYTES,
              "snippet [%zu, %zu), the passage starts at %zu", r[0].snippet_start, r[0].snippet_end, at);
    const size_t a0 = r[0].snippet_start, e0 = r[0].snippet_end;
    /* another query: another window (the proxy does weigh meaning), and without a model the start */
    const char *q2 = "the lighthouse keeper lights the lamp at dusk";
    CHECK(modattn__search_snippets(m, q2, strlen(q2), r, 1) == 0);
    CHECK_MSG(r[0].snippet_start != a0 && r[0].snippet_start < 100, "another query's window starts at %zu", r[0].snippet_start);
    CHECK(modattn__search_snippets(NULL, q, strlen(q), r, 1) == 0 && r[0].snippet_start == 0);
    /* alone or third of three (after another meaning-only chunk and a short one): the same window */
    char twice[2048];
    snprintf(twice, sizeof twice, "%s %s", chunk, chunk);
    r[0].chunk.text = twice;
    r[1].chunk.text = (char *)"The lamp on the hill.";
    r[2].chunk.text = (char *)chunk;
    CHECK(modattn__search_snippets(m, q, strlen(q), r, 3) == 0);
    CHECK(r[2].snippet_start == a0 && r[2].snippet_end == e0 && r[1].snippet_start == 0 && r[1].snippet_end == 21);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
}

int main(void) {
    char dir[] = "/tmp/modattn_snippet_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_words_in_the_middle();
    test_meaning_in_the_middle();
    test_static_meaning();
    test_deterministic();
    test_huge();
    test_store_marks(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_snippet");
}
