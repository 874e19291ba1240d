/* fuzz/fuzz_config.c — arbitrary bytes as a model folder's configuration files, through
 * modattn__config_load (modules.json, config.json, sentence_bert_config.json and the pooling
 * module's config.json: module paths, types, sizes, activations, pooling modes).
 *
 * The input is cut at its first three "\n--\n" separators into modules.json, config.json,
 * sentence_bert_config.json and 1_Pooling/config.json, written to a private folder (under
 * $TMPDIR, /tmp by default) for each run; a missing part is a missing file. Invariants of an
 * accepted folder: every size inside the range the loader promises (hidden a multiple of heads,
 * max_tokens within max_position_embeddings, a pooling mode, dim = modes x hidden, the
 * transformer folder inside the model folder); a refusal carries a message naming a file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/core.h"
#include "model/model_internal.h"

#define FUZZ_CHECK(c)                                                                    \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "fuzz_config: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static char g_dir[256];
static const char *const k_files[4] = {"modules.json", "config.json", "sentence_bert_config.json",
                                       "1_Pooling/config.json"};

static void put(const char *name, const uint8_t *p, size_t n, int present) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    unlink(path);
    if (!present) return;
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

static const uint8_t *find_sep(const uint8_t *p, size_t n) {
    for (size_t i = 0; i + 4 <= n; i++)
        if (p[i] == '\n' && p[i + 1] == '-' && p[i + 2] == '-' && p[i + 3] == '\n') return p + i;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/modattn-fuzz-config-%ld", tmp && *tmp ? tmp : "/tmp",
                 (long)getpid());
        char sub[300];
        snprintf(sub, sizeof sub, "%s/1_Pooling", g_dir);
        if ((mkdir(g_dir, 0700) != 0 && access(g_dir, W_OK) != 0) ||
            (mkdir(sub, 0700) != 0 && access(sub, W_OK) != 0)) {
            fprintf(stderr, "fuzz_config: cannot make %s\n", sub);
            abort();
        }
    }
    const uint8_t *p = data, *end = data + size;
    for (int i = 0; i < 4; i++) {
        const uint8_t *s = i < 3 ? find_sep(p, (size_t)(end - p)) : NULL;
        const uint8_t *e = s ? s : end;
        put(k_files[i], p, (size_t)(e - p), p < end || i == 0);
        p = s ? s + 4 : end;
    }
    modattn__model_config c;
    int st = modattn__config_load(g_dir, &c);
    if (st) {
        FUZZ_CHECK(st == MODATTN_EFORMAT || st == MODATTN_ENOTFOUND || st == MODATTN_EUNSUPPORTED ||
                   st == MODATTN_EINVAL || st == MODATTN_EIO || st == MODATTN_ENOMEM);
        FUZZ_CHECK(strstr(modattn_last_error(), ".json") != NULL || strstr(modattn_last_error(), "path") != NULL);
        return 0;
    }
    FUZZ_CHECK(c.hidden >= 1 && c.heads >= 1 && c.hidden % c.heads == 0);
    FUZZ_CHECK(c.layers >= 1 && c.intermediate >= 1 && c.vocab >= 1 && c.max_positions >= 1);
    FUZZ_CHECK(c.max_tokens >= 2 && c.max_tokens <= (size_t)c.max_positions);
    FUZZ_CHECK(c.pooling != 0 && c.pooling < 64);
    size_t k = 0;
    for (unsigned b = c.pooling; b; b &= b - 1) k++;
    FUZZ_CHECK(c.dim == k * (size_t)c.hidden);
    FUZZ_CHECK(c.ln_eps >= 0 && c.ln_eps <= 1);
    FUZZ_CHECK(strncmp(c.transformer_dir, g_dir, strlen(g_dir)) == 0);
    FUZZ_CHECK(strstr(c.transformer_dir, "..") == NULL);
    FUZZ_CHECK(memchr(c.model_type, '\0', sizeof c.model_type) != NULL);
    return 0;
}
