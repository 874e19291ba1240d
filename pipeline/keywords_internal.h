/* pipeline/keywords_internal.h — what keywords.c shares with search.c and stopwords.c: the stop-word
 * lists and what a store's keyword query was made of. Not a public header. */
#ifndef MODATTN_PIPELINE_KEYWORDS_INTERNAL_H
#define MODATTN_PIPELINE_KEYWORDS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include "pipeline/internal_store.h"

struct modattn_store;

/* One language's stop words (the generated table of stopwords.c). */
typedef struct modattn__stoplist {
    const char *lang; /* ISO 639-1 */
    size_t n;
    const char *const *words; /* UTF-8, as the list writes them */
} modattn__stoplist;

/* The languages with a list: 0 when the build had none (liblingua-stopwords-perl missing). */
size_t modattn__stopword_languages(void);
const char *modattn__stopword_source(void);   /* "" when none */
const char *modattn__stopword_lang(int lang); /* "en", ...; "" for -1 */
/* The language whose list holds the most of the n words (any case, with or without diacritics):
 * English on a tie; another language needs two of them. -1 when no list holds any. */
int modattn__stopword_language(const char *const *words, size_t n);
/* Whether word is on language lang's list (-1: on none). */
bool modattn__is_stopword(int lang, const char *word);

/* What modattn__store_keyword_query made of a text. */
#define MODATTN__KW_FIXES 256
typedef struct modattn__kw_query_info {
    size_t words;     /* runs of the text worth a phrase */
    size_t stop;      /* of them stop words (the text's language's list) */
    size_t common;    /* of them held by more than the common share of the chunks */
    size_t kept;      /* phrases in the query */
    bool weak_only;   /* every word was a stop word or common: the query is made of them (they find
                       * passages by nothing but such words) */
    int lang;         /* the stop-word language (-1: none) */
    char fixes[MODATTN__KW_FIXES]; /* "recursivly → recursively, recurs → recurs*" ("" none) */
} modattn__kw_query_info;

/* A word held by more than this share of a store's chunks carries no information for keyword
 * search, as a stop word: BM25's idf is about 0 there. (A fifth was tried: on a store about one
 * subject it drops the subject's own words, "tea" and "party" in a store of the tea-party chapter.) */
#define MODATTN__KW_COMMON_SHARE 0.5

/* modattn__store_keyword_query_info: modattn__store_keyword_query with what it did in *info (may be NULL), and in *marks (may be NULL;
 * modattn_free) the query of the words that matter alone, for the spans to mark (stop words never
 * marked). */
int modattn__store_keyword_query_info(struct modattn_store *s, const char *text, size_t len, char **out, char **marks,
                                 modattn__kw_query_info *info);

#endif
