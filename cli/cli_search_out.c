/* cli/cli_search_out.c — what `search` prints (text and JSON) and how it reads --queries, shared
 * by the plain command (cmd_search.c) and its MPI form (cmd_mpi_search.c), so that both print the
 * same bytes. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"
#include "core/internal_core.h"

#define SNIPPET_BYTES 240 /* (MODATTN_SNIPPET_BYTES, pipeline/snippet.c) */

/* One piece of the snippet: whitespace collapsed (across pieces, via *space), escaped for the
 * terminal, appended to out. */
static void put_piece(const char *t, size_t a, size_t b, bool *space, char *out, size_t *o, size_t cap) {
    char raw[SNIPPET_BYTES * 2 + 16], safe[4 * (SNIPPET_BYTES * 2 + 16)];
    size_t r = 0;
    for (size_t i = a; i < b && r + 2 < sizeof raw; i++) {
        const unsigned char c = (unsigned char)t[i];
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            *space = true;
            continue;
        }
        if (*space && (*o > 0 || r > 0)) raw[r++] = ' ';
        *space = false;
        raw[r++] = (char)c;
    }
    raw[r] = '\0';
    const char *e = cli_term_text(raw, safe, sizeof safe);
    size_t n = strlen(e);
    if (*o + n + 1 > cap) n = cap - *o - 1;
    memcpy(out + *o, e, n);
    *o += n;
    out[*o] = '\0';
}

/* The chunk's snippet (the library's choice of window: modattn_search_result.snippet_start and
 * snippet_end, pipeline/snippet.c) on one line, whitespace collapsed, the words that matter
 * marked (bold on a terminal, else with « »), escaped for the terminal. */
static void snippet(const modattn_search_result *r, bool tty, char *out, size_t cap) {
    const char *t = r->chunk.text;
    const size_t len = strlen(t);
    const size_t to = r->snippet_end <= len ? r->snippet_end : len;
    const size_t from = r->snippet_start <= to ? r->snippet_start : to;
    const char *on = tty ? "\033[1m" : "\xc2\xab", *off = tty ? "\033[0m" : "\xc2\xbb";
    size_t o = 0;
    bool space = false;
    out[0] = '\0';
    if (from > 0) put_piece("\xe2\x80\xa6", 0, 3, &space, out, &o, cap);
    size_t at = from;
    for (size_t i = 0; i < r->nspans && at < to; i++) {
        size_t a = r->spans[i].start, b = r->spans[i].end;
        if (b <= at || a >= to || b > len) continue;
        if (a < at) a = at;
        if (b > to) b = to;
        put_piece(t, at, a, &space, out, &o, cap);
        if (space && o > 0 && o + 1 < cap) out[o++] = ' ', out[o] = '\0';
        space = false;
        if (o + strlen(on) + 1 < cap) o += (size_t)snprintf(out + o, cap - o, "%s", on);
        put_piece(t, a, b, &space, out, &o, cap);
        if (o + strlen(off) + 1 < cap) o += (size_t)snprintf(out + o, cap - o, "%s", off);
        at = b;
    }
    put_piece(t, at, to, &space, out, &o, cap);
    if (to < len && o + 4 < cap) o += (size_t)snprintf(out + o, cap - o, "\xe2\x80\xa6");
}

static const cli_search_rerank *g_rerank; /* search --rerank: set around one print */
void cli_search_print_rerank(const cli_search_rerank *rr) { g_rerank = rr; }

/* Prints one query's results (batch: its 1-based number and text, JSON as one line). 0, or the
 * exit status of a failure to write JSON. */
int cli_search_print(const modattn_search_params *sp, const modattn_search_info *info,
                     const modattn_search_result *res, size_t n, bool json, int tty_marks, size_t batch_no,
                     const char *batch_query) {
    int rc = 0;
    if (json) {
        json_t *arr = json_array();
        int bad = !arr;
        for (size_t i = 0; i < n && !bad; i++) {
            char pbuf[PATH_MAX];
            const modattn_store_chunk *c = &res[i].chunk;
            const modattn_search_result *r = &res[i];
            json_t *o = json_pack("{s:i, s:f, s:o, s:o, s:o, s:o}", "rank", r->rank, "score", (double)r->score,
                                  "vector_rank", r->vector_rank ? json_integer(r->vector_rank) : json_null(),
                                  "keyword_rank", r->keyword_rank ? json_integer(r->keyword_rank) : json_null(),
                                  "cosine", isfinite(r->cosine) ? json_real((double)r->cosine) : json_null(),
                                  "bm25", isfinite(r->bm25) ? json_real(r->bm25) : json_null());
            json_t *hl = json_array();
            for (size_t h = 0; hl && h < r->nspans; h++)
                if (json_array_append_new(hl, json_pack("[I, I]", (json_int_t)r->spans[h].start,
                                                        (json_int_t)r->spans[h].end)))
                    bad = 1;
            if (!o || !hl || json_object_set_new(o, "highlights", hl)) bad = 1;
            /* added by issue 40: which rankings found it, and the text output's snippet window */
            const char *found = modattn__search_found_by(r);
            const size_t from = r->snippet_start, to = r->snippet_end;
            if (!bad && (json_object_set_new(o, "found_by", json_string(found)) ||
                         json_object_set_new(o, "snippet", json_pack("[I, I]", (json_int_t)from, (json_int_t)to))))
                bad = 1;
            if (!bad && r->sparse_rank &&
                (json_object_set_new(o, "sparse_rank", json_integer(r->sparse_rank)) ||
                 json_object_set_new(o, "sparse_score", json_real(r->sparse_score))))
                bad = 1;
            if (!bad && g_rerank && i < g_rerank->n &&
                (json_object_set_new(o, "first_stage_rank", json_integer(g_rerank->first_rank[i])) ||
                 json_object_set_new(o, "first_stage_score", json_real((double)g_rerank->first_score[i]))))
                bad = 1;
            if (bad || cli_json_set_path(o, "path", cli_rel_path(c->path, pbuf, sizeof pbuf)) ||
                json_object_set_new(o, "chunk_id", json_integer((json_int_t)c->id)) ||
                json_object_set_new(o, "kind", json_string(c->kind ? c->kind : "")) ||
                json_object_set_new(o, "start", json_integer((json_int_t)c->start)) ||
                json_object_set_new(o, "end", json_integer((json_int_t)c->end)) ||
                json_object_set_new(o, "line", json_integer((json_int_t)c->line)) ||
                json_object_set_new(o, "page", json_integer((json_int_t)c->page)) ||
                json_object_set_new(o, "text", cli_json_text(c->text)) || json_array_append_new(arr, o))
                bad = 1;
        }
        json_t *j = bad ? NULL : json_pack("{s:s, s:o}", "mode", modattn_search_mode_name(sp->mode), "results", arr);
        if (bad) json_decref(arr);
        if (j && info->index[0] && json_object_set_new(j, "index", json_string(info->index))) bad = 1;
        if (j && g_rerank && json_object_set_new(j, "rerank", json_string(g_rerank->model))) bad = 1;
        if (j && info->index_note[0] && json_object_set_new(j, "index_note", cli_json_text(info->index_note))) bad = 1;
        if (j && batch_query &&
            (json_object_set_new(j, "query", json_integer((json_int_t)batch_no)) ||
             json_object_set_new(j, "text", cli_json_text(batch_query))))
            bad = 1;
        char *text = j && !bad ? json_dumps(j, (batch_query ? JSON_COMPACT : JSON_INDENT(2)) | JSON_REAL_PRECISION(7))
                               : NULL;
        if (modattn__json_take_failure() != 0 || !text) {
            modattn__json_free(text);
            text = NULL;
            rc = cli_json_fail("search: writing JSON");
        } else {
            puts(text);
            modattn__json_free(text);
        }
        json_decref(j);
        return rc;
    }
    if (batch_query) {
        char qbuf[4 * 512];
        char shown[512];
        snprintf(shown, sizeof shown, "%s", batch_query);
        printf("%s== query %zu: %s\n", batch_no > 1 ? "\n" : "", batch_no, cli_term_text(shown, qbuf, sizeof qbuf));
    }
    if (n == 0) printf(sp->mode == MODATTN_SEARCH_KEYWORD ? "no results: no chunk holds the query's words\n"
                                                         : "no results: the store is empty\n");
    const bool tty = tty_marks < 0 ? isatty(STDOUT_FILENO) == 1 : tty_marks > 0;
    for (size_t i = 0; i < n; i++) {
        char pbuf[PATH_MAX], snip[8 * (SNIPPET_BYTES + 16)], loc[96];
        char spath[4 * PATH_MAX];
        const modattn_store_chunk *c = &res[i].chunk;
        if (c->page > 0)
            snprintf(loc, sizeof loc, "page %lld, bytes %lld-%lld", (long long)c->page,
                     (long long)c->start, (long long)c->end);
        else if (c->line > 0)
            snprintf(loc, sizeof loc, "line %lld, bytes %lld-%lld", (long long)c->line,
                     (long long)c->start, (long long)c->end);
        else
            snprintf(loc, sizeof loc, "bytes %lld-%lld", (long long)c->start,
                     (long long)c->end);
        snippet(&res[i], tty, snip, sizeof snip);
        /* a score people read: the cosine with the query (by words alone, where nothing was
         * embedded: BM25; after --rerank, the reranker's score), and which rankings found it */
        char score[32], why[112];
        const modattn_search_result *r = &res[i];
        const bool reranked = g_rerank && i < g_rerank->n;
        if (reranked) snprintf(score, sizeof score, "rerank %.4f", (double)r->score);
        else if (sp->mode == MODATTN_SEARCH_SPARSE) snprintf(score, sizeof score, "sparse %.2f", r->sparse_score);
        else if (isfinite(r->cosine)) snprintf(score, sizeof score, "cosine %.2f", (double)r->cosine);
        else snprintf(score, sizeof score, "bm25 %.2f", isfinite(r->bm25) ? r->bm25 : (double)r->score);
        if (r->vector_rank && r->keyword_rank)
            snprintf(why, sizeof why, "found by both: meaning #%d, words #%d", r->vector_rank, r->keyword_rank);
        else if (r->keyword_rank) snprintf(why, sizeof why, "found by words #%d", r->keyword_rank);
        else snprintf(why, sizeof why, "found by meaning #%d", r->vector_rank ? r->vector_rank : r->rank);
        if (r->sparse_rank) { /* the sparse ranking brought it too (or alone) */
            if (!r->vector_rank && !r->keyword_rank) snprintf(why, sizeof why, "found by sparse #%d", r->sparse_rank);
            else {
                size_t w = strlen(why);
                snprintf(why + w, sizeof why - w, ", sparse #%d", r->sparse_rank);
            }
        }
        if (reranked) {
            size_t w = strlen(why);
            snprintf(why + w, sizeof why - w, "; reranked, first stage #%d", g_rerank->first_rank[i]);
        }
        printf("%2d. %s  %s  (%s)  %s\n    %s\n", r->rank, score,
               cli_term_text(cli_rel_path(c->path, pbuf, sizeof pbuf), spath, sizeof spath), loc, why, snip);
    }
    return 0;
}

/* The lines of path ("-": standard input), blank ones left out, into *out (modattn__malloc'd
 * strings, counted against --mem-budget). A line past CLI_MAX_LINE, memory and read errors stop
 * the run with the line's number: never a shorter set of queries taken for the whole. */
int cli_read_queries(const char *path, char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "modattn: search: --queries %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL, **v = NULL;
    size_t cap = 0, nv = 0, vcap = 0, got = 0, lineno = 0;
    char what[4200];
    snprintf(what, sizeof what, "--queries %s", path);
    int rc = 0, r;
    while ((r = cli_read_line(f, &line, &cap, &got, CLI_MAX_LINE)) == 1) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (memchr(line, '\0', got)) {
            fprintf(stderr, "modattn: search: --queries %s: line %zu holds a NUL byte\n", path, lineno);
            rc = 1;
            break;
        }
        size_t sp = strspn(line, " \t");
        if (line[sp] == '\0') continue;
        if (nv == vcap) {
            size_t nc = vcap ? 2 * vcap : 64;
            char **nvv = modattn__realloc(v, nc * sizeof *v, MODATTN_MEM_OTHER);
            if (!nvv) {
                r = -2;
                break;
            }
            v = nvv, vcap = nc;
        }
        if (!(v[nv] = modattn__strndup(line, got, MODATTN_MEM_OTHER))) {
            r = -2;
            break;
        }
        nv++;
    }
    if (!rc && r < 0) {
        cli_line_error("search", what, lineno + 1, r);
        rc = 1;
    }
    modattn_free(line);
    if (f != stdin) fclose(f);
    if (!rc && nv == 0) {
        fprintf(stderr, "modattn: search: --queries %s: no query in it\n", path);
        rc = 2;
    }
    if (rc) {
        for (size_t i = 0; i < nv; i++) modattn_free(v[i]);
        modattn_free(v);
        return rc;
    }
    *out = v;
    *n = nv;
    return 0;
}

