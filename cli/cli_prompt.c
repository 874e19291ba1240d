/* cli/cli_prompt.c — the options every embedding command shares for prompts and Matryoshka
 * dimensions (--prompt-name, --prompt, --dimensions: embed, index, search), their checks against
 * the loaded model (usage errors, exit 2), and the note that says which prompt is used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_prompt_option(const char *cmd, int argc, char **argv, int *i, bool dims, bool say, modattn_embed_options *eo) {
    bool missing = false;
    const char *v;
    if ((v = cli_opt_value(argc, argv, i, "--prompt-name", &missing))) {
        eo->prompt_name = v;
    } else if (!missing && (v = cli_opt_value(argc, argv, i, "--prompt", &missing))) {
        eo->prompt = v;
    } else if (!missing && dims && (v = cli_opt_value(argc, argv, i, "--dimensions", &missing))) {
        char *end = NULL;
        long long d = *v ? strtoll(v, &end, 10) : 0;
        if (!*v || *end || d < 1 || d > (1 << 20)) {
            if (say) fprintf(stderr, "modattn: %s: --dimensions: '%s' is not a count of dimensions (1 or more)\n", cmd, v);
            return 2;
        }
        eo->dimensions = (size_t)d;
    } else if (missing) {
        if (say) fprintf(stderr, "modattn: %s: %s needs a value\n", cmd, argv[*i]);
        return 2;
    } else {
        return -1;
    }
    if (eo->prompt && eo->prompt_name) {
        if (say) fprintf(stderr, "modattn: %s: give --prompt TEXT or --prompt-name NAME, not both\n", cmd);
        return 2;
    }
    return 0;
}

int cli_prompt_check(const char *cmd, const modattn_model *m, const modattn_embed_options *eo, bool say) {
    const char *t = NULL;
    if (eo->dimensions && eo->dimensions > modattn_model_dim(m)) {
        if (say)
            fprintf(stderr, "modattn: %s: --dimensions %zu: model %s gives %zu dimensions (use 1 to %zu)\n", cmd,
                    eo->dimensions, modattn_model_get_info(m)->name, modattn_model_dim(m), modattn_model_dim(m));
        return 2;
    }
    if (modattn_model_resolve_prompt(m, eo, &t, NULL)) {
        if (say) fprintf(stderr, "modattn: %s: --prompt-name: %s\n", cmd, modattn_last_error());
        return 2;
    }
    return 0;
}

void cli_prompt_say(const char *cmd, const modattn_model *m, const modattn_embed_options *eo, const char *what) {
    const char *t = NULL, *name = NULL;
    if (modattn_model_resolve_prompt(m, eo, &t, &name)) return;
    char shown[200];
    if (!t && eo->task == MODATTN_EMBED_DOCUMENT && !eo->prompt && !eo->prompt_name) {
        /* sentence-transformers' encode_document takes "document" (empty unless set) before
         * "passage" and "corpus": an e5-style model's "passage" prompt is used only when asked */
        for (size_t i = 0; i < modattn_model_prompt_count(m); i++) {
            const char *n = NULL, *x = NULL;
            modattn_model_prompt_at(m, i, &n, &x);
            if ((strcmp(n, "passage") == 0 || strcmp(n, "corpus") == 0) && *x) {
                fprintf(stderr, "modattn: note: %s: %s no prompt (as sentence-transformers' encode_document: "
                        "the model's \"document\" prompt is empty); --prompt-name %s puts its \"%s\" before them\n",
                        cmd, what, n, cli_term_text(x, shown, sizeof shown));
                return;
            }
        }
    }
    if (!t) return;
    fprintf(stderr, "modattn: note: %s: %s %s%s%s prompt: \"%s\"\n", cmd, what,
            name ? "the model's \"" : "the", name ? name : "", name ? "\"" : "", cli_term_text(t, shown, sizeof shown));
}
