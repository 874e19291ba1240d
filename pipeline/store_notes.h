/* pipeline/store_notes.h — what the store remembers about files that are not documents (not a
 * public header): an archive walked as a folder (its members are the documents,
 * "a.zip!/inner/file.txt"; the note says the archive was read whole at this size and mtime, so a
 * later run skips it unchanged without opening it), and a file skipped for its format (a PNG, an
 * ELF: the note keeps why, so a later run skips it unchanged without saying so again).
 *
 * The table (noted_files) is made by the first writer that needs it, inside its transaction: a
 * store without it reads as having no notes, and an older modattn opening a store with it ignores
 * it (no schema version change). A note is written in the same transaction as what it vouches
 * for, or after it: a kill leaves at most a file read again. */
#ifndef MODATTN_PIPELINE_STORE_NOTES_H
#define MODATTN_PIPELINE_STORE_NOTES_H

#include <stdint.h>

struct modattn_store;

/* How the message of a file skipped for the same reason by an earlier run, unchanged since, ends
 * (the indexer's SKIPPED event): `modattn index` says it only with --verbose. */
#define MODATTN__AS_BEFORE " (as before: unchanged since)"

typedef struct modattn__note {
    int64_t size, mtime_ns;
    uint64_t hash;
    char what[16];    /* "archive" or "skipped" */
    char reason[256]; /* why it was skipped ("a PNG image (unsupported format)") */
} modattn__note;

/* 1 found (*out filled), 0 none, < 0 an error. */
int modattn__note_get(struct modattn_store *s, const char *path, modattn__note *out);
/* Writes (replaces) the note of path; inside the caller's transaction if one is open. */
int modattn__note_put(struct modattn_store *s, const char *path, const modattn__note *n);
/* Removes the note of path and, with under, those of "path/..." and "path!/...": the count removed
 * (>= 0), or < 0 an error. Inside the caller's transaction if one is open. */
int64_t modattn__note_delete(struct modattn_store *s, const char *path, int under);
/* Every note's path in path order (fn non-zero stops and is returned). */
int modattn__note_each(struct modattn_store *s, int (*fn)(void *ud, const char *path, const char *what), void *ud);

#endif
