/* model/static_embed.c — the mean of a text's input word embeddings (model/internal_static.h). */
#include <string.h>

#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/encoder_internal.h"
#include "model/internal_static.h"
#include "modattn/tokenizer.h"

size_t modattn__model_static_dim(const modattn_model *m) { return m ? (size_t)m->cfg.hidden : 0; }

int modattn__model_static_rows(const modattn_model *m, const char *text, size_t len, const float **rows, size_t max,
                               size_t *n) {
    if (n) *n = 0;
    if (!m || !n || (!rows && max) || (!text && len))
        return modattn__error(MODATTN_EINVAL, "modattn__model_static_rows: NULL argument");
    if (!m->word) return modattn__error(MODATTN_EINVAL, "%s: the model has no word-embedding table", m->name);
    const size_t H = (size_t)m->cfg.hidden, lim = m->cfg.max_tokens;
    int32_t *ids = modattn__malloc(lim * sizeof *ids, MODATTN_MEM_OTHER);
    if (!ids) return modattn__mem_last_status();
    size_t k = 0;
    int st = modattn_model_tokenize(m, text ? text : "", len, ids, lim, &k);
    const int32_t cls = modattn_tokenizer_cls_id(m->tok), sep = modattn_tokenizer_sep_id(m->tok),
                  pad = modattn_tokenizer_pad_id(m->tok);
    for (size_t i = 0; !st && i < k && *n < max; i++) {
        const int32_t id = ids[i];
        if (id == cls || id == sep || id == pad || id < 0 || id >= m->cfg.vocab) continue;
        rows[(*n)++] = m->word + (size_t)id * H;
    }
    modattn_free(ids);
    return st;
}

int modattn__model_static_mean(const modattn_model *m, const char *text, size_t len, float *out, size_t *ntok) {
    if (ntok) *ntok = 0;
    if (!m || !out || (!text && len))
        return modattn__error(MODATTN_EINVAL, "modattn__model_static_mean: NULL argument");
    const size_t H = (size_t)m->cfg.hidden, max = m->cfg.max_tokens;
    memset(out, 0, H * sizeof *out);
    const float **rows = modattn__malloc(max * sizeof *rows, MODATTN_MEM_OTHER);
    double *sum = modattn__calloc(H, sizeof *sum, MODATTN_MEM_OTHER);
    size_t n = 0;
    int st = rows && sum ? modattn__model_static_rows(m, text, len, rows, max, &n) : modattn__mem_last_status();
    /* summed in double, in token order: the same text gives the same mean, bit for bit */
    for (size_t i = 0; !st && i < n; i++)
        for (size_t k = 0; k < H; k++) sum[k] += rows[i][k];
    if (!st && n)
        for (size_t k = 0; k < H; k++) out[k] = (float)(sum[k] / (double)n);
    modattn_free(rows);
    modattn_free(sum);
    if (ntok && !st) *ntok = n;
    return st;
}
