/* pipeline/indexer_stages.h — the indexer's stages for a front end that spreads them over
 * processes (cli/cmd_mpi.c: `modattn index --mpi`). Not a public header: the modattn__ names stay
 * out of libmodattn.so's exports; the modattn program links the static library.
 *
 * modattn_index_paths (modattn/ingest.h) takes each file through classify (what the store has,
 * size and mtime, content hash) -> load the document (kind, text) -> chunk -> embed (batches
 * across documents) -> sink (one transaction per document, in the run's order). A distributed run
 * uses the same stages three ways, so that one process writes the store exactly as a plain run
 * does (the same documents, chunks, vectors bit for bit and chunk ids, since a text's embedding
 * does not depend on what it is batched with):
 *   plan:  modattn__index_plan, classify alone: the files a run would embed, changing nothing;
 *   embed: modattn__index_run with no store and a sink: each process reads, extracts, chunks and
 *          embeds its share, and hands each document's vectors to its sink;
 *   write: modattn__index_run on the store with remote/fetch: a document another process embeds
 *          is not embedded here; its vectors are fetched when its turn to be written comes (until
 *          then the run goes on with the next files, so that waiting costs nothing while there is
 *          work of its own). */
#ifndef MODATTN_PIPELINE_INDEXER_STAGES_H
#define MODATTN_PIPELINE_INDEXER_STAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/ingest.h"

/* A document whose chunks are all embedded: what a sink gets. */
typedef struct modattn__index_doc {
    const char *path;
    uint64_t hash;         /* XXH3 of the file's bytes */
    size_t nchunks, dim;
    const float *vecs;     /* [nchunks, dim], L2-normalised */
    const int32_t *ntok;   /* word pieces fed to the model per chunk, specials included */
} modattn__index_doc;

/* The stages a caller replaces (NULL members: the library's own). */
typedef struct modattn__index_stages {
    /* embed: 1 if another process embeds the document at path (0: this one, < 0: stop) ... */
    int (*remote)(void *ud, const char *path);
    /* ... and then its vectors and word-piece counts, for the document as this run read it (hash,
     * nchunks): 1 filled; 0 not there yet (only when wait is false); 2 they will never come or are
     * of another content (then it is embedded here); < 0 stop the run (the message set). Set both
     * or neither. */
    int (*fetch)(void *ud, const char *path, uint64_t hash, size_t nchunks, size_t dim, float *vecs,
                 int32_t *ntok, bool wait);
    /* sink: each document whose chunks are all embedded, in the run's order, instead of the store
     * (0, or < 0 to stop). Files not indexed (binary, no text, unreadable) never come. */
    int (*sink)(void *ud, const modattn__index_doc *doc);
    void *ud;
} modattn__index_stages;

/* modattn_index_paths with the stages replaced. store may be NULL when stages->sink is set: then
 * every file given is embedded (nothing is looked up) and the run ends with the last document
 * (no prune, no vector file, no ANN index). Events and progress are the options' as in a plain run. */
int modattn__index_run(modattn_store *store, modattn_model *model, const char *const *paths, size_t npaths,
                       const modattn_index_options *opt, const modattn__index_stages *stages,
                       modattn_index_stats *stats);

/* The classify stage alone: the walk and the decisions of a run (unchanged by size and mtime,
 * then by content hash) give each file the run would embed (new, or changed) with its size, in
 * the run's order, to fn (non-zero stops the plan and is returned). Nothing is embedded and
 * nothing in the store changes but its model binding (a store of another model: MODATTN_EVERSION). */
int modattn__index_plan(modattn_store *store, modattn_model *model, const char *const *paths, size_t npaths,
                        const modattn_index_options *opt, int (*fn)(void *ud, const char *path, uint64_t size),
                        void *ud, modattn_index_stats *stats);

#endif
