/* pipeline/store_ext.h — the store's extension points (not a public header). What keeps state on
 * a store's connection (the keyword index's FTS5 functions and chunk sizes: keywords.c) registers
 * itself here on first use, and the store (store.c) releases every registered state when that
 * connection closes, through the hook, without naming who registered it: the store knows no
 * extension, the extensions know the store (its accessors in pipeline_internal.h). The vector
 * file (vecfile.c) needs no slot: it keeps nothing on the connection, and what it frees (a
 * modattn_store_vectors) the store frees on its own. */
#ifndef MODATTN_PIPELINE_STORE_EXT_H
#define MODATTN_PIPELINE_STORE_EXT_H

struct modattn_store;

typedef struct modattn__store_ext {
    const char *name; /* "keywords": for a reader of a debugger, nothing depends on it */
    /* Frees the extension's state (never NULL here). Runs when the store closes and when it opens
     * its connection again (read-only without locks, store.c): state made for the old connection
     * (functions registered on it) goes with it, and the extension makes it anew on next use. */
    void (*release)(void *state);
} modattn__store_ext;

/* At most this many extensions on one store (each is a static table in its file). */
#define MODATTN__STORE_MAX_EXT 4

/* ext's slot on s: its state (NULL until the extension puts one there), ext registered with s on
 * the first call. ext must be a static object (its address identifies it). NULL only when
 * MODATTN__STORE_MAX_EXT extensions are already registered (a build error, not a user's). */
void **modattn__store_ext_slot(struct modattn_store *s, const modattn__store_ext *ext);

#endif
