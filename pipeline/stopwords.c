/* pipeline/stopwords.c — stop words: words that carry no information for keyword search ("the",
 * "on", "does"), per language, from the Snowball project's lists as Debian's
 * liblingua-stopwords-perl ships them. pipeline/CMakeLists.txt reads them at configure time into a
 * generated header; here they are normalised once (case folded, diacritics removed: as the keyword
 * index's unicode61 tokenizer with remove_diacritics 2 sees its words) and sorted for lookup. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "pipeline/keywords_internal.h"

#include "modattn_stopwords_data.h"

#define NLANG (sizeof k_stoplists / sizeof k_stoplists[0])

typedef struct normlist {
    char **w;
    size_t n;
} normlist;

static normlist g_norm[NLANG];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* case folded, marks stripped, composed (malloc'd; NULL on failure) */
static char *norm(const char *s) {
    utf8proc_uint8_t *o = NULL;
    if (utf8proc_map((const utf8proc_uint8_t *)s, 0, &o,
                     UTF8PROC_NULLTERM | UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_CASEFOLD | UTF8PROC_STRIPMARK) < 0)
        return NULL;
    return (char *)o;
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void build(void) {
    for (size_t l = 0; l < NLANG; l++) {
        const modattn__stoplist *sl = &k_stoplists[l];
        if (!sl->n) continue;
        char **w = malloc(sl->n * sizeof *w);
        size_t n = 0;
        for (size_t i = 0; w && i < sl->n; i++)
            if ((w[n] = norm(sl->words[i]))) n++;
        if (w) qsort(w, n, sizeof *w, by_str);
        g_norm[l] = (normlist){w, w ? n : 0}; /* (kept for the process: a few kB) */
    }
}

size_t modattn__stopword_languages(void) { return k_stoplists[0].n ? NLANG : 0; }
const char *modattn__stopword_source(void) { return MODATTN_STOPWORDS_SOURCE; }
const char *modattn__stopword_lang(int lang) {
    return lang >= 0 && (size_t)lang < NLANG && k_stoplists[lang].n ? k_stoplists[lang].lang : "";
}

static bool on_list(size_t l, const char *nw) {
    return nw && g_norm[l].n && bsearch(&nw, g_norm[l].w, g_norm[l].n, sizeof *g_norm[l].w, by_str) != NULL;
}

bool modattn__is_stopword(int lang, const char *word) {
    if (lang < 0 || (size_t)lang >= NLANG || !word || !modattn__stopword_languages()) return false;
    pthread_once(&g_once, build);
    char *nw = norm(word);
    const bool on = on_list((size_t)lang, nw);
    free(nw);
    return on;
}

int modattn__stopword_language(const char *const *words, size_t n) {
    if (!modattn__stopword_languages() || n == 0) return -1;
    pthread_once(&g_once, build);
    size_t hits[NLANG] = {0};
    for (size_t i = 0; i < n; i++) {
        char *nw = norm(words[i]);
        for (size_t l = 0; nw && l < NLANG; l++) hits[l] += on_list(l, nw);
        free(nw);
    }
    int best = -1;
    for (size_t l = 0; l < NLANG; l++) { /* (English is first: it wins a tie) */
        if (hits[l] == 0 || (l > 0 && hits[l] < 2)) continue;
        if (best < 0 || hits[l] > hits[best]) best = (int)l;
    }
    return best;
}
