/* cli/cmd_stats.c — `modattn stats`: what a store holds and what it costs: documents, chunks,
 * generation and bytes of the store; rows, removed rows and bytes per vector of the vector file;
 * and of its search index (DB.ann: hnsw, ivf-*, or the compact f16/int8/binary copies) the kind,
 * parameters, bytes per vector, whether it is current, and its recall@10 against the exact scan,
 * measured here on stored vectors used as queries (their own row left out), with the time per
 * query of both; and of its sparse (SPLADE) vectors, if any, the rows, the chunks that have them
 * and the model that made them. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "modattn/ann.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "core/internal_status.h"
#include "pipeline/internal_ann.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"

#define STATS_K 10

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

typedef struct recall_out {
    size_t queries;
    double recall, index_ms, exact_ms; /* ms per query, all queries in one call */
} recall_out;

/* recall@STATS_K of a against the exact scan over v, with nq live rows of v (evenly spread) as
 * queries, each query's own chunk left out of both answers. */
static int measure_recall(const modattn_ann *a, const modattn_store_vectors *v, size_t nq, const modattn_exec *exec,
                          recall_out *out) {
    memset(out, 0, sizeof *out);
    if (nq > v->n) nq = v->n;
    if (nq == 0) return 0;
    const size_t dim = v->dim, k = STATS_K + 1;
    float *q = malloc(nq * dim * sizeof *q), *es = malloc(nq * k * sizeof *es), *as = malloc(nq * k * sizeof *as);
    int64_t *self = malloc(nq * sizeof *self), *ei = malloc(nq * k * sizeof *ei), *ai = malloc(nq * k * sizeof *ai);
    size_t *en = malloc(nq * sizeof *en), *an = malloc(nq * sizeof *an);
    int st = 0;
    if (!q || !es || !as || !self || !ei || !ai || !en || !an) {
        st = modattn__error(MODATTN_ENOMEM, "%zu queries: out of memory", nq);
        goto done;
    }
    /* live rows, evenly spaced over all rows */
    size_t got = 0, next = 0; /* rows strictly increasing: no row taken twice */
    for (size_t i = 0; i < nq; i++) {
        size_t r = (size_t)((double)i * (double)v->rows / (double)nq);
        if (r < next) r = next;
        while (r < v->rows && v->mask && (v->mask[r / 8] >> (r % 8) & 1)) r++;
        for (size_t g = 0; r < v->rows && g < v->nseg; g++) {
            const modattn_store_vector_segment *sg = &v->seg[g];
            if (r >= sg->row0 && r < sg->row0 + sg->n) {
                memcpy(q + got * dim, sg->data + (r - sg->row0) * v->ld, dim * sizeof(float));
                self[got++] = sg->chunk_ids[r - sg->row0];
                next = r + 1;
            }
        }
    }
    nq = got;
    double t0 = now_ms();
    if ((st = modattn__store_vectors_topk_batch(v, q, nq, k, exec, ei, es, en))) goto done;
    double t1 = now_ms();
    if ((st = modattn__ann_topk_batch(a, v, q, nq, k, NULL, exec, ai, as, an))) goto done;
    double t2 = now_ms();
    size_t hit = 0, total = 0;
    for (size_t i = 0; i < nq; i++) {
        size_t ne = 0;
        for (size_t j = 0; j < en[i] && ne < STATS_K; j++) {
            if (ei[i * k + j] == self[i]) continue;
            ne++;
            size_t na = 0;
            for (size_t m = 0; m < an[i] && na < STATS_K; m++) {
                if (ai[i * k + m] == self[i]) continue;
                na++;
                if (ai[i * k + m] == ei[i * k + j]) {
                    hit++;
                    break;
                }
            }
        }
        total += ne;
    }
    out->queries = nq;
    out->recall = total ? (double)hit / (double)total : 1.0;
    out->exact_ms = (t1 - t0) / (double)nq;
    out->index_ms = (t2 - t1) / (double)nq;
done:
    free(q), free(es), free(as), free(self), free(ei), free(ai), free(en), free(an);
    return st;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: modattn stats [--db FILE] [--json] [--recall-queries N]\n\n"
            "What a store holds and what it costs:\n"
            "  store      documents, chunks, generation, the model and the precision its vectors were\n"
            "             made in, the prompts (documents, queries) when there are, bytes on disk (with\n"
            "             the WAL)\n"
            "  vectors    rows (and rows of removed chunks not yet compacted), the vector file's bytes\n"
            "             per vector, whether it is current\n"
            "  index      the search index beside the store (DB.ann: `modattn index --ann KIND`):\n"
            "             kind, parameters, bytes per vector, current or why not, and its recall@10\n"
            "             against the exact scan, measured now with N stored vectors as queries (their\n"
            "             own row left out), with each one's time per query in one batch\n"
            "  sparse     the SPLADE vectors (`modattn index --sparse DIR`): rows of the inverted\n"
            "             index, chunks that have them, and the model and pruning they were made with\n\n"
            "  --db FILE            the store (default " MODATTN_STORE_DEFAULT_PATH ")\n"
            "  --json               one JSON object\n"
            "  --recall-queries N   stored vectors used as queries for the recall (default 200; 0: not\n"
            "                       measured)\n");
}

int cli_cmd_stats(cli_globals *g, int argc, char **argv) {
    const char *db = MODATTN_STORE_DEFAULT_PATH;
    bool json = false;
    long long nrecall = 200;
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if ((v = cli_opt_value(argc, argv, &i, "--db", &missing))) {
            db = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--recall-queries", &missing))) {
            if (cli_parse_ll("--recall-queries", v, 0, 100000, &nrecall)) return 2;
        } else {
            fprintf(stderr, "modattn: stats: %s '%s' (see --help)\n", missing ? "missing value for" : "unknown argument",
                    argv[i]);
            return 2;
        }
    }
    modattn_store *s = NULL;
    int st = modattn_store_open(db, MODATTN_STORE_READONLY, &s);
    if (st) return cli_fail("opening the store", st);
    modattn_ctx *ctx = NULL;
    if (cli_open_ctx(g, &ctx)) {
        modattn_store_close(s);
        return 1;
    }
    char model[128] = "", hash[17] = "", vpath[4200], apath[4200], wal[4200], vwhy[512] = "", awhy[512] = "";
    size_t dim = 0;
    uint64_t gen = 0;
    modattn_store_counts c;
    memset(&c, 0, sizeof c);
    modattn_store_vectors v;
    memset(&v, 0, sizeof v);
    modattn_ann *a = NULL;
    recall_out rec;
    memset(&rec, 0, sizeof rec);
    int rc = 0;
    char prec[16] = "fp32", dprompt[1024] = "", qprompt[1024] = "";
    modattn__sparse_ident sid;
    bool have_sparse = false;
    int64_t srows = 0, schunks = 0;
    if ((st = modattn_store_get_model(s, model, sizeof model, hash, &dim)) ||
        (st = modattn__store_sparse_get(s, &sid, &have_sparse)) ||
        (st = modattn__store_sparse_count(s, &srows, &schunks)) ||
        (st = modattn_store_get_precision(s, prec, sizeof prec)) || (st = modattn_store_get_counts(s, &c)) ||
        (st = modattn_store_generation(s, &gen)) || (st = modattn__store_vector_file_path(s, vpath, sizeof vpath)) ||
        (st = modattn__store_ann_file_path(s, apath, sizeof apath))) {
        rc = cli_fail("reading the store", st);
        goto out;
    }
    /* the prompts its vectors were made with (README: prompts); one over 1 KiB is said so */
    if (modattn_store_get_prompt(s, false, dprompt, sizeof dprompt)) snprintf(dprompt, sizeof dprompt, "(over 1 KiB)");
    if (modattn_store_get_prompt(s, true, qprompt, sizeof qprompt)) snprintf(qprompt, sizeof qprompt, "(over 1 KiB)");
    snprintf(wal, sizeof wal, "%s-wal", db);
    const int vcur = modattn__store_vector_file_current(s, vwhy, sizeof vwhy);
    if ((st = modattn__store_open_vectors(s, &v))) {
        rc = cli_fail("reading the vectors", st);
        goto out;
    }
    const int aok = modattn__ann_open(s, &v, &a, awhy, sizeof awhy);
    if (aok < 0) {
        rc = cli_fail("opening the search index", aok);
        goto out;
    }
    if (a && nrecall > 0 && (st = measure_recall(a, &v, (size_t)nrecall, modattn_ctx_exec(ctx), &rec))) {
        rc = cli_fail("measuring the recall", st);
        goto out;
    }
    const uint64_t dbb = file_size(db), walb = file_size(wal), vb = file_size(vpath), ab = file_size(apath);
    const double per = v.rows ? 1.0 / (double)v.rows : 0;
    char params[200] = "";
    if (a) {
        modattn_ann_params p;
        modattn__ann_get_params(a, &p);
        modattn_ann_params_format(modattn__ann_get_kind(a), &p, params, sizeof params);
    }
    if (json) {
        json_t *o = json_object(), *jst = json_object(), *jv = json_object(), *ji = json_null();
        json_object_set_new(jst, "model", cli_json_text(model));
        json_object_set_new(jst, "precision", json_string(prec));
        json_object_set_new(jst, "document_prompt", cli_json_text(dprompt));
        json_object_set_new(jst, "query_prompt", cli_json_text(qprompt));
        json_object_set_new(jst, "dim", json_integer((json_int_t)dim));
        json_object_set_new(jst, "documents", json_integer(c.documents));
        json_object_set_new(jst, "chunks", json_integer(c.chunks));
        json_object_set_new(jst, "generation", json_integer((json_int_t)gen));
        json_object_set_new(jst, "bytes", json_integer((json_int_t)(dbb + walb)));
        json_object_set_new(jv, "rows", json_integer((json_int_t)v.rows));
        json_object_set_new(jv, "removed_rows", json_integer((json_int_t)v.masked));
        json_object_set_new(jv, "file_bytes", json_integer((json_int_t)vb));
        json_object_set_new(jv, "bytes_per_vector", json_real((double)vb * per));
        json_object_set_new(jv, "current", json_boolean(vcur == 1));
        if (vcur != 1 && vwhy[0]) json_object_set_new(jv, "note", cli_json_text(vwhy));
        if (a || ab) {
            ji = json_object();
            json_object_set_new(ji, "kind", json_string(a ? modattn_ann_kind_name(modattn__ann_get_kind(a)) : "unusable"));
            json_object_set_new(ji, "params", json_string(params));
            json_object_set_new(ji, "file_bytes", json_integer((json_int_t)ab));
            json_object_set_new(ji, "bytes_per_vector", json_real((double)ab * per));
            json_object_set_new(ji, "current", json_boolean(a != NULL));
            if (!a) json_object_set_new(ji, "note", cli_json_text(awhy));
            if (rec.queries) {
                json_object_set_new(ji, "recall10", json_real(rec.recall));
                json_object_set_new(ji, "recall_queries", json_integer((json_int_t)rec.queries));
                json_object_set_new(ji, "ms_per_query", json_real(rec.index_ms));
                json_object_set_new(ji, "exact_ms_per_query", json_real(rec.exact_ms));
            }
        }
        json_t *jsp = json_object();
        json_object_set_new(jsp, "rows", json_integer((json_int_t)srows));
        json_object_set_new(jsp, "chunks", json_integer((json_int_t)schunks));
        json_object_set_new(jsp, "model", have_sparse ? cli_json_text(sid.name) : json_null());
        if (have_sparse) {
            json_object_set_new(jsp, "identity", json_string(sid.identity));
            json_object_set_new(jsp, "top_k", json_integer((json_int_t)sid.top_k));
            json_object_set_new(jsp, "threshold", json_real((double)sid.threshold));
        }
        json_object_set_new(o, "store", jst);
        json_object_set_new(o, "vectors", jv);
        json_object_set_new(o, "index", ji);
        json_object_set_new(o, "sparse", jsp);
        if (have_sparse && sid.dir[0] && cli_json_set_path(jsp, "dir", sid.dir) != 0) {
            json_decref(o);
            rc = cli_json_fail("stats");
            goto out;
        }
        if (cli_json_set_path(jst, "path", db) != 0) {
            json_decref(o);
            rc = cli_json_fail("stats");
            goto out;
        }
        rc = cli_print_json(o);
    } else {
        char tb[1024];
        printf("store      %s: model %s (dimension %zu, precision %s)\n", cli_term_text(db, tb, sizeof tb), model, dim,
               prec);
        if (dprompt[0] || qprompt[0]) {
            char pb[300], qb[300];
            printf("           prompts: documents \"%s\", queries \"%s\"\n", cli_term_text(dprompt, pb, sizeof pb),
                   cli_term_text(qprompt, qb, sizeof qb));
        }
        printf("           %lld documents, %lld chunks, generation %llu, %.2f MB on disk\n", (long long)c.documents,
               (long long)c.chunks, (unsigned long long)gen, (double)(dbb + walb) / 1e6);
        printf("vectors    %zu rows (%zu of removed chunks), vector file %.2f MB: %.0f bytes/vector, %s\n", v.rows,
               v.masked, (double)vb / 1e6, (double)vb * per,
               vcur == 1 ? "current" : vwhy[0] ? cli_term_text(vwhy, tb, sizeof tb) : "none");
        if (a) {
            printf("index      %s%s%s%s: %.2f MB, %.0f bytes/vector, current\n",
                   modattn_ann_kind_name(modattn__ann_get_kind(a)), params[0] ? " (" : "", params, params[0] ? ")" : "",
                   (double)ab / 1e6, (double)ab * per);
            if (rec.queries)
                printf("recall@10  %.4f over %zu stored vectors as queries (their own row left out): %.3f ms/query, "
                       "exact scan %.3f (one batch)\n",
                       rec.recall, rec.queries, rec.index_ms, rec.exact_ms);
        } else if (ab) {
            printf("index      not usable: %s\n", cli_term_text(awhy, tb, sizeof tb));
        } else {
            printf("index      none: searches scan every vector exactly (`modattn index --ann KIND` builds one)\n");
        }
        if (have_sparse) {
            char nb[300], db2[1024];
            printf("sparse     %lld rows over %lld chunks (%.1f per chunk), model %s (%s, identity %s, top-k %zu, "
                   "threshold %g)\n",
                   (long long)srows, (long long)schunks, schunks ? (double)srows / (double)schunks : 0.0,
                   cli_term_text(sid.name, nb, sizeof nb), sid.dir[0] ? cli_term_text(sid.dir, db2, sizeof db2) : "?",
                   sid.identity, sid.top_k, (double)sid.threshold);
        } else {
            printf("sparse     none: 0 rows, 0 chunks (`modattn index --sparse DIR` keeps SPLADE vectors)\n");
        }
    }
out:
    modattn__ann_close(a);
    modattn__store_vectors_free(&v);
    modattn_store_close(s);
    return cli_finish_stdout(rc);
}
