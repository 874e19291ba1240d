/* cli/cli_index_out.c — what `index` says: about each file (skipped, pruned, unreadable) on stderr
 * and gathered for --json, the progress line, and the summary; shared by the plain command
 * (cmd_index.c) and its MPI form (cmd_mpi.c), so that both say the same. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "modattn/ingest.h"
#include "core/internal_core.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/store_notes.h"

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
    if (ev == MODATTN_INDEX_SKIPPED && !ui->verbose) {
        /* a file skipped before and unchanged since: said when it was; a reason said already this
         * run ("a PNG image (unsupported format)") is not said again (--verbose says them all) */
        size_t n = strlen(msg), k = strlen(MODATTN__AS_BEFORE);
        if (n >= k && strcmp(msg + n - k, MODATTN__AS_BEFORE) == 0) {
            ui->not_said++;
            return;
        }
        if (ui->said && json_object_get(ui->said, msg)) {
            ui->not_said++;
            if (ui->json) goto list; /* --json lists every file skipped this run */
            return;
        }
        if (ui->said && json_object_set_new(ui->said, msg, json_true())) ui->oom = 1;
    }
list:
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


void cli_index_note_wait(void *ud, const char *msg) {
    (void)ud;
    char safe[700];
    fprintf(stderr, "modattn: note: %s\n", cli_term_text(msg, safe, sizeof safe));
}

static void fmt_duration(double s, char *buf, size_t len) {
    if (!(s >= 0) || s > 359999) {
        snprintf(buf, len, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

void cli_index_on_progress(void *ud, const modattn_index_progress *p) {
    cli_index_ui *ui = ud;
    if (!ui->tty || ui->quiet) return;
    double rate = p->elapsed_s > 0 ? (double)p->tokens / p->elapsed_s : 0;
    char eta[32] = "--:--";
    if (p->bytes_done > 0 && p->bytes_total >= p->bytes_done && p->elapsed_s > 0.5)
        fmt_duration(p->elapsed_s * (double)(p->bytes_total - p->bytes_done) / (double)p->bytes_done,
                     eta, sizeof eta);
    fprintf(stderr, "\r\033[Kindexing: %llu/%llu files  %llu chunks  %.0f tok/s  ETA %s",
            (unsigned long long)p->files_done, (unsigned long long)p->files_total,
            (unsigned long long)p->chunks, rate, eta);
    fflush(stderr);
    ui->line_shown = true;
}

void cli_index_on_ann_progress(void *ud, const char *phase, size_t done, size_t total) {
    const cli_index_ui *ui = ud;
    if (ui->quiet || !ui->tty) return;
    if (strcmp(phase, "add") == 0)
        fprintf(stderr, "\r\033[KANN index: %s rows %zu/%zu (%.0f%%)", done < total ? "adding" : "added", done, total,
                total ? 100.0 * (double)done / (double)total : 100.0);
    else if (done == 0)
        fprintf(stderr, "\r\033[KANN index: %s", strcmp(phase, "train") == 0 ? "training" : "writing");
}

/* ---- the summary */

/* The ANN index's update as JSON (what `index --json` prints under "ann"). */
static json_t *ann_json(const modattn_ann_update *u) {
    static const char *const actions[] = {"none", "current", "added", "built", "removed"};
    char params[200];
    modattn_ann_params_format(u->kind, &u->params, params, sizeof params);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:f}", "action", actions[u->action], "kind",
                          modattn_ann_kind_name(u->kind), "params", params, "rows", (json_int_t)u->rows, "rows_added",
                          (json_int_t)u->rows_added, "bytes", (json_int_t)u->file_bytes, "seconds", u->seconds);
    if (j && u->reason[0]) json_object_set_new(j, "reason", cli_json_text(u->reason));
    return j;
}

/* --json: the summary as one document; 0 or the status of a failure to make it */
static int print_json(const cli_index_job *jb, const char *db_rel, const char *vf, int nranks) {
    const modattn_index_stats *s = &jb->s;
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:O, s:O}",
                          "files_seen", (json_int_t)s->files_seen,
                          "files_indexed", (json_int_t)s->files_indexed,
                          "files_unchanged", (json_int_t)s->files_unchanged,
                          "files_skipped", (json_int_t)s->files_skipped,
                          "files_pruned", (json_int_t)s->files_pruned,
                          "chunks_embedded", (json_int_t)s->chunks_embedded,
                          "tokens_embedded", (json_int_t)s->tokens_embedded,
                          "seconds", jb->secs, "db", "",
                          "errors", jb->ui.errors, "skipped", jb->ui.skipped);
    if (j && nranks > 0) json_object_set_new(j, "ranks", json_integer(nranks));
    if (j && cli_json_set_path(j, "db", db_rel)) json_decref(j), j = NULL;
    if (j) json_object_set_new(j, "vector_file", cli_json_text(vf));
    if (j && s->vector_file_appended) {
        json_object_set_new(j, "vector_file_rows_added", json_integer((json_int_t)s->vector_file_rows_added));
        json_object_set_new(j, "vector_file_rows_masked", json_integer((json_int_t)s->vector_file_rows_masked));
    }
    if (j && s->vector_file_written && !s->vector_file_appended && s->vector_file_reason[0])
        json_object_set_new(j, "vector_file_reason", cli_json_text(s->vector_file_reason));
    if (j && jb->au.action != MODATTN_ANN_ACTION_NONE) json_object_set_new(j, "ann", ann_json(&jb->au));
    if (j && jb->ann_err[0]) json_object_set_new(j, "ann_error", cli_json_text(jb->ann_err));
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) : NULL;
    int rc = 0;
    if (modattn__json_take_failure() != 0 || !text) { /* incl. one while building ui.errors */
        rc = cli_json_fail("index: writing JSON");
    } else {
        puts(text);
    }
    modattn__json_free(text);
    json_decref(j);
    return rc;
}

/* the summary as text: the files (when there were PATHs), then the ANN index's update */
static void print_text(const cli_index_args *a, const cli_index_job *jb, const char *db_rel, int nranks) {
    const modattn_index_stats *s = &jb->s;
    const modattn_ann_update *au = &jb->au;
    char db_shown[4 * PATH_MAX];
    cli_term_text(db_rel, db_shown, sizeof db_shown);
    if (a->npaths) {
        printf("%s: %llu files seen: %llu indexed (%llu chunks, %llu tokens, %.0f tokens/s), %llu unchanged, "
               "%llu skipped", db_shown, (unsigned long long)s->files_seen, (unsigned long long)s->files_indexed,
               (unsigned long long)s->chunks_embedded, (unsigned long long)s->tokens_embedded,
               jb->secs > 0 ? (double)s->tokens_embedded / jb->secs : 0.0, (unsigned long long)s->files_unchanged,
               (unsigned long long)s->files_skipped);
        if (s->errors) printf(" (%llu unreadable)", (unsigned long long)s->errors);
        if (a->prune) printf(", %llu pruned", (unsigned long long)s->files_pruned);
        printf(" in %.1f s", jb->secs);
        if (nranks > 0) printf(" on %d ranks", nranks);
        printf("\n");
    }
    if (au->action == MODATTN_ANN_ACTION_NONE) return;
    char pf[200], params[210], rb[1024];
    modattn_ann_params_format(au->kind, &au->params, pf, sizeof pf);
    snprintf(params, sizeof params, "%s%s%s", pf[0] ? " (" : "", pf, pf[0] ? ")" : "");
    if (au->action == MODATTN_ANN_ACTION_REMOVED) printf("ANN index removed\n");
    else if (au->action == MODATTN_ANN_ACTION_CURRENT)
        printf("ANN index %s%s: current, %zu rows\n", modattn_ann_kind_name(au->kind), params, au->rows);
    else
        printf("ANN index %s%s: %s %zu rows in %.1f s, %.1f MB%s%s%s\n", modattn_ann_kind_name(au->kind), params,
               au->action == MODATTN_ANN_ACTION_ADDED ? "added" : "built over", au->rows_added, au->seconds,
               (double)au->file_bytes / 1e6, au->reason[0] ? " (" : "",
               au->reason[0] ? cli_term_text(au->reason, rb, sizeof rb) : "", au->reason[0] ? ")" : "");
}

int cli_index_print(const cli_index_args *a, cli_index_job *j, int nranks) {
    int rc = j->rc;
    if (j->st) {
        if (!rc) rc = cli_fail("index", j->st);
        return rc;
    }
    if (!j->ui.errors || !j->ui.skipped || j->ui.oom) {
        fprintf(stderr, "modattn: index: out of memory\n");
        return 1;
    }
    const modattn_index_stats *s = &j->s;
    char dbuf[PATH_MAX], tvf[4096], vf[400];
    char *abs_db = modattn__path_absolute(a->db);
    const char *db_rel = abs_db ? cli_rel_path(abs_db, dbuf, sizeof dbuf) : a->db;
    /* DB.vec, what `search` maps: a failure to write it costs searches speed, not results */
    if (s->vector_file_error[0]) {
        snprintf(vf, sizeof vf, "not written: %s", s->vector_file_error);
        fprintf(stderr, "modattn: index: warning: the vector file was not written (searches will read the store, "
                        "slower): %s\n", cli_term_text(s->vector_file_error, tvf, sizeof tvf));
    } else snprintf(vf, sizeof vf, "%s", !s->vector_file_written ? "current"
                                         : s->vector_file_appended ? "appended" : "written");
    if (a->json) rc = print_json(j, db_rel, vf, nranks);
    else print_text(a, j, db_rel, nranks);
    if (!a->json && !a->quiet && j->ui.not_said)
        fprintf(stderr, "modattn: index: %zu more skipped file%s not named (a reason said above, or skipped before "
                        "and unchanged since): --verbose lists them\n", j->ui.not_said, j->ui.not_said == 1 ? "" : "s");
    modattn_free(abs_db);
    if (cli_stdout_check()) rc = 1;
    else if (s->errors) rc = 3;
    return rc;
}
