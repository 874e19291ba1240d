/* model/model_tokenizer_access.c — a loaded model's tokenizer for callers outside model/ that
 * need token offsets (document chunking in pipeline/). The model keeps its tokenizer private, so
 * this loads another copy of the same tokenizer.json: the one of the Transformer module that
 * modules.json names in the model's directory, exactly as modattn_model_load found it. */
#include "model/model_internal.h"
#include "modattn/core.h"
#include "modattn/model.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

int modattn_model_load_tokenizer(const modattn_model *m, modattn_tokenizer **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_model_load_tokenizer: out is NULL");
    *out = NULL;
    if (!m) return modattn__error(MODATTN_EINVAL, "modattn_model_load_tokenizer: model is NULL");
    const modattn_model_info *info = modattn_model_get_info(m);
    /* the configuration holds paths of PATH_MAX bytes: keep it off the stack */
    modattn__model_config *cfg = modattn__calloc(1, sizeof *cfg, MODATTN_MEM_OTHER);
    if (!cfg) return modattn__mem_last_status();
    char *path = modattn__malloc(MODATTN__PATH_MAX, MODATTN_MEM_OTHER);
    int st = path ? 0 : modattn__mem_last_status();
    if (!st) st = modattn__config_load(info->dir, cfg);
    if (!st) st = modattn__path_join(path, MODATTN__PATH_MAX, cfg->transformer_dir, "tokenizer.json");
    if (!st) st = modattn_tokenizer_load(path, out);
    modattn_free(path);
    modattn_free(cfg);
    return st;
}
