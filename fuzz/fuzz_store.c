/* fuzz/fuzz_store.c — arbitrary bytes as a store's SQLite file, through the read path a search
 * takes: open read-only (schema version, the bound model), the counts, every stored path, the
 * vectors (from the store: there is no vector file), a top-3 over them and each hit's chunk, as
 * `modattn search` reads them; the keyword index (a query, its BM25 top 5 and their spans); then
 * SQLite's integrity check. The file is written to a private
 * folder (under $TMPDIR, /tmp by default) each run; SQLite's -wal/-shm beside it are removed.
 * Invariants: no crash and no sanitizer report; every refusal carries a message; counts are
 * not negative; vectors are a usable shape and a top-3 over them succeeds; a chunk read back has a path, a kind and valid UTF-8
 * text, or is refused. The seeds (fuzz/corpus/store) are small real stores. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"

#define FUZZ_CHECK(c)                                                                   \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "fuzz_store: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

static char g_db[300];

static void clean(void) {
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal", ".vec"};
    char p[320];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s%s", g_db, sfx[i]);
        unlink(p);
    }
}

static int count_path(void *ud, const char *path) {
    FUZZ_CHECK(path != NULL && strlen(path) < (1u << 30));
    (*(int64_t *)ud)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_db[0]) {
        const char *tmp = getenv("TMPDIR");
        char dir[256];
        snprintf(dir, sizeof dir, "%s/modattn-fuzz-store-%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
        if (mkdir(dir, 0700) != 0 && access(dir, W_OK) != 0) {
            fprintf(stderr, "fuzz_store: cannot make %s\n", dir);
            abort();
        }
        snprintf(g_db, sizeof g_db, "%s/s.db", dir);
    }
    clean();
    FILE *f = fopen(g_db, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();

    modattn_store *s = NULL;
    int st = modattn_store_open(g_db, MODATTN_STORE_READONLY, &s);
    if (st) {
        FUZZ_CHECK(s == NULL && modattn_last_error()[0] != '\0');
        clean();
        return 0;
    }
    modattn_store_counts c;
    int have_counts = modattn_store_get_counts(s, &c) == 0;
    if (have_counts) FUZZ_CHECK(c.documents >= 0 && c.chunks >= 0 && c.embeddings >= 0);
    else FUZZ_CHECK(modattn_last_error()[0] != '\0');
    char name[256], hash[17];
    size_t dim = 0;
    (void)modattn_store_get_model(s, name, sizeof name, hash, &dim);
    int64_t paths = 0;
    (void)modattn__store_each_path(s, count_path, &paths);
    modattn_store_vectors v;
    if (modattn__store_open_vectors(s, &v) == 0) {
        if (v.n) {
            FUZZ_CHECK(v.dim >= 1 && v.ld >= v.dim && v.nseg >= 1);
            float *q = calloc(v.dim, sizeof *q);
            if (q) {
                for (size_t i = 0; i < v.dim; i++) q[i] = 1.0f / (float)(i + 1);
                int64_t ids[3];
                float sc[3];
                size_t n = 0;
                FUZZ_CHECK(modattn__store_vectors_topk(&v, q, 3, NULL, ids, sc, &n) == 0);
                FUZZ_CHECK(n <= 3 && n <= v.n);
                for (size_t i = 0; i < n; i++) {
                    modattn_store_chunk ch;
                    if (modattn__store_get_chunk(s, ids[i], &ch) == 0) {
                        FUZZ_CHECK(ch.path && ch.kind && ch.text);
                        FUZZ_CHECK(modattn__utf8_valid(ch.text, strlen(ch.text)));
                        modattn__store_chunk_clear(&ch);
                    } else {
                        FUZZ_CHECK(modattn_last_error()[0] != '\0');
                    }
                }
                free(q);
            }
        }
        modattn__store_vectors_free(&v);
    } else {
        FUZZ_CHECK(modattn_last_error()[0] != '\0');
    }
    /* the keyword index (schema 3): a query, its top 5 by BM25, each hit's spans inside its text */
    if (modattn__store_has_keywords(s)) {
        static const char text[] = "the lighthouse keeper \"NEAR(error E4021 caf\xc3\xa9 *";
        char *fts = NULL;
        if (modattn__store_keyword_query(s, text, sizeof text - 1, &fts, NULL) == 0) {
            FUZZ_CHECK(fts != NULL);
            int64_t ids[5];
            double sc[5];
            size_t n = 0;
            if (modattn__store_keyword_topk(s, fts, 5, NULL, ids, sc, &n) == 0) {
                FUZZ_CHECK(n <= 5);
                for (size_t i = 0; i < n; i++) {
                    modattn_text_span *sp = NULL;
                    size_t nsp = 0;
                    /* (offsets into the index's copy of the text: a hostile file's may not be
                     * the chunk's; modattn__search_run keeps only those inside the chunk's text) */
                    if (modattn__store_keyword_spans(s, fts, ids[i], &sp, &nsp) == 0) {
                        for (size_t j = 0; j < nsp; j++) FUZZ_CHECK(sp[j].start < sp[j].end && (j == 0 || sp[j].start > sp[j - 1].end));
                        modattn_free(sp);
                    } else {
                        FUZZ_CHECK(modattn_last_error()[0] != '\0');
                    }
                }
            } else {
                FUZZ_CHECK(modattn_last_error()[0] != '\0');
            }
            modattn_free(fts);
        } else {
            FUZZ_CHECK(modattn_last_error()[0] != '\0');
        }
    }
    (void)modattn_store_integrity_check(s);
    modattn_store_close(s);
    clean();
    return 0;
}
