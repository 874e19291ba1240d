/* cli/cli_index_out.c — what `index` says about each file (skipped, pruned, unreadable) on stderr
 * and gathers for --json, shared by the plain command (cmd_index.c) and its MPI form (cmd_mpi.c). */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>

#include "cli/cli.h"
#include "modattn/ingest.h"

void cli_index_clear_line(cli_index_ui *ui) {
    if (ui->line_shown) {
        fputs("\r\033[K", stderr);
        ui->line_shown = false;
    }
}

void cli_index_on_event(void *ud, modattn_index_event ev, const char *path, const char *msg) {
    cli_index_ui *ui = ud;
    char buf[PATH_MAX], tshown[4 * PATH_MAX], tmsg[4096];
    const char *rel = cli_rel_path(path, buf, sizeof buf);
    if (ev == MODATTN_INDEX_ERROR || ev == MODATTN_INDEX_SKIPPED) {
        json_t *list = ev == MODATTN_INDEX_ERROR ? ui->errors : ui->skipped;
        json_t *o = json_object();
        if (!o || cli_json_set_path(o, "path", rel) ||
            json_object_set_new(o, ev == MODATTN_INDEX_ERROR ? "message" : "reason", cli_json_text(msg)) ||
            json_array_append_new(list, o))
            ui->oom = 1;
    }
    if (ui->json) return;
    const char *shown = cli_term_text(rel, tshown, sizeof tshown);
    msg = cli_term_text(msg, tmsg, sizeof tmsg);
    if (ev == MODATTN_INDEX_ERROR || (ev != MODATTN_INDEX_INDEXED && !ui->quiet)) {
        cli_index_clear_line(ui);
        if (ev == MODATTN_INDEX_SKIPPED) fprintf(stderr, "modattn: index: %s: skipped (%s)\n", shown, msg);
        else if (ev == MODATTN_INDEX_PRUNED) fprintf(stderr, "modattn: index: %s: pruned (%s)\n", shown, msg);
        else fprintf(stderr, "modattn: index: %s: %s\n", shown, msg);
    }
}

