/* fuzz/fuzz_vecfile.c — feeds arbitrary bytes to the vector file's reader as a whole file. An
 * accepted file must give a view a search can walk: segments inside the input, row counts that
 * add up, a mask whose bits match its count; then a top-k over it (every segment, the mask
 * applied) must return only unmasked rows' ids. ASan sees any read outside the input (which is
 * copied to a buffer of exactly its size, 64-byte aligned, as a mapping is). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"
#include "pipeline/pipeline_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    /* exact size, so that the sanitizer catches a read one past it */
    void *mem = NULL;
    if (posix_memalign(&mem, 64, size) != 0) return 0;
    uint8_t *buf = mem;
    memcpy(buf, data, size);
    /* inputs whose last byte is odd get their checksums made right first, so that mutations
     * reach the layout checks behind them */
    if (size > 4096 + 1 && (data[size - 1] & 1)) modattn__vecfile_reseal(buf, size);
    modattn_store_vectors v;
    char why[256];
    if (modattn__vecfile_view(buf, size, &v, why, sizeof why) == 1) {
        size_t rows = 0;
        for (size_t g = 0; g < v.nseg; g++) {
            if (v.seg[g].row0 != rows) abort();
            rows += v.seg[g].n;
        }
        if (rows != v.rows || v.n + v.masked != v.rows || (v.masked && !v.mask)) abort();
        float *q = calloc(v.dim, sizeof *q);
        int64_t ids[3];
        float sc[3];
        size_t n = 0;
        if (q) {
            for (size_t i = 0; i < v.dim; i++) q[i] = 1.0f / (float)(i + 1);
            if (modattn__store_vectors_topk(&v, q, 3, NULL, ids, sc, &n) != 0) abort();
            if (n > 3 || n > v.n) abort();
            /* every id returned is an unmasked row's */
            for (size_t i = 0; i < n; i++) {
                int found = 0;
                for (size_t g = 0; g < v.nseg && !found; g++)
                    for (size_t r = 0; r < v.seg[g].n && !found; r++) {
                        size_t gr = v.seg[g].row0 + r;
                        if (v.seg[g].chunk_ids[r] == ids[i] && !(v.mask && (v.mask[gr >> 3] >> (gr & 7) & 1)))
                            found = 1;
                    }
                if (!found) abort();
            }
            free(q);
        }
    }
    free(buf);
    return 0;
}
