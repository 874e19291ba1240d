/* pipeline/store_embed.c — how to embed for a store: the prompt and the Matryoshka dimensions its
 * vectors were made with are part of its identity (modattn_store_model), so that indexing and
 * searching agree (modattn_store_embed_options, modattn/store.h). */
#include <string.h>

#include "modattn/model.h"
#include "modattn/status.h"
#include "modattn/store.h"
#include "core/internal_status.h"

int modattn_store_embed_options(modattn_store *s, const modattn_model *m, const modattn_embed_options *asked,
                                bool query, modattn_embed_options *eo, modattn_store_model *sm) {
    if (!m || !eo || !sm) return modattn__error(MODATTN_EINVAL, "modattn_store_embed_options: NULL argument");
    const modattn_model_info *info = modattn_model_get_info(m);
    *eo = asked ? *asked : (modattn_embed_options){0};
    eo->task = query ? MODATTN_EMBED_QUERY : MODATTN_EMBED_DOCUMENT;
    if (!eo->dimensions && s) { /* the store's, when it holds this model's vectors cut to fewer */
        char name[256], hash[17];
        size_t sdim = 0;
        if (modattn_store_get_model(s, name, sizeof name, hash, &sdim) == 0 &&
            strcmp(hash, info->weights_hash) == 0 && sdim >= 1 && sdim < info->dim)
            eo->dimensions = sdim;
        modattn_clear_error();
    }
    const size_t d = modattn_model_embed_dim(m, eo);
    if (!d) return MODATTN_EINVAL; /* the message is set */
    const char *p = NULL;
    int st = modattn_model_resolve_prompt(m, eo, &p, NULL);
    if (st) return st;
    *sm = modattn_store_model_of(info);
    sm->dim = d;
    if (query) sm->query_prompt = p ? p : "", sm->document_prompt = NULL;
    else sm->document_prompt = p ? p : "";
    return 0;
}
