/* cli/cmd_mpi_search.c — `mpirun -np N modattn search --mpi ...`: the scan of the stored vectors
 * spread over N processes, the answer printed by rank 0 exactly as `modattn search` prints it.
 *
 * Scatter and gather: rank 0 checks the store's model and embeds the queries, and sends the
 * normalised query vectors to every rank; each rank maps the store's vector file (or reads the
 * vectors from the store, as a plain search does when the file is not current) and scans its
 * slice of the rows (rows [r * rows / N, (r + 1) * rows / N) across the segments, masked rows
 * left out) for each query's best C (C = the candidates a plain search takes: k, or max(k, 50)
 * in hybrid mode) with the same kernel and order as a plain scan; rank 0 gathers them, keeps the
 * best C of all (score, then the lower chunk id: the order of one scan over every row), adds
 * the keyword ranking's candidates, and runs the plain search (modattn__search_run) over the
 * vectors of just those chunks. A row's score does not depend on which rows are scanned with it,
 * so the ranks, scores, cosines and fusion are the plain search's bit for bit
 * (tests/cli/mpi_search.sh checks it). The store must be on every rank's file system (a shared
 * one across machines): the shards are slices of one store, and a rank's generation of the
 * store is checked against rank 0's (an index between their opens is an error: run it again).
 *
 * The printing is the plain command's (cli/cli_search_out.c), so the output is the same bytes;
 * mpirun hands every rank a pseudo-terminal for its output whatever mpirun's own output is, so a
 * terminal cannot be told from a file here and the words are marked as for a file (« »). */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_internal.h"
#include "modattn/core.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"

#ifndef MODATTN_HAVE_MPI

int cli_cmd_search_mpi(cli_globals *g, int argc, char **argv) {
    (void)g, (void)argc, (void)argv;
    return cli_mpi_missing("search");
}

#else

#include <mpi.h>


/* ---- the scatter and gather */

/* rows [lo, hi) of v (numbered across its segments, as the mask numbers them) as vectors of
 * their own; the mask and the row numbering are v's */
static void slice_of(const modattn_store_vectors *v, size_t lo, size_t hi, modattn_store_vectors *out) {
    memset(out, 0, sizeof *out);
    out->dim = v->dim;
    out->ld = v->ld;
    out->rows = v->rows;
    out->mask = v->mask;
    out->generation = v->generation;
    for (size_t g = 0; g < v->nseg; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        size_t a = sg->row0 > lo ? sg->row0 : lo, b = sg->row0 + sg->n < hi ? sg->row0 + sg->n : hi;
        if (a >= b) continue;
        modattn_store_vector_segment *o = &out->seg[out->nseg++];
        o->data = sg->data + (a - sg->row0) * v->ld;
        o->chunk_ids = sg->chunk_ids + (a - sg->row0);
        o->n = b - a;
        o->row0 = a;
        for (size_t r = a; r < b; r++)
            if (!v->mask || !(v->mask[r / 8] >> (r % 8) & 1)) out->n++;
    }
    if (out->nseg) {
        out->data = out->seg[0].data;
        out->chunk_ids = out->seg[0].chunk_ids;
    }
}


typedef struct mcand {
    float score;
    int64_t id;
} mcand;
static int cand_cmp(const void *a, const void *b) { /* the order of one scan over every row */
    const mcand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}
static int id_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The vectors of the chunks ids (n of them, any order, repeats fine) that v holds, as one
 * segment in ascending chunk id: what modattn__search_run scans on rank 0. */
static int subset_of(const modattn_store_vectors *v, int64_t *ids, size_t n, modattn_store_vectors *out,
                     float **data, int64_t **out_ids) {
    memset(out, 0, sizeof *out);
    out->dim = v->dim;
    out->ld = v->ld ? v->ld : v->dim;
    out->generation = v->generation;
    *data = NULL;
    *out_ids = NULL;
    qsort(ids, n, sizeof *ids, id_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || ids[u - 1] != ids[i]) ids[u++] = ids[i];
    float *d = modattn__malloc((u ? u : 1) * out->ld * sizeof(float), MODATTN_MEM_OTHER);
    int64_t *oi = modattn__malloc((u ? u : 1) * sizeof *oi, MODATTN_MEM_OTHER);
    if (!d || !oi) {
        modattn_free(d);
        modattn_free(oi);
        return modattn__mem_last_status();
    }
    size_t m = 0;
    for (size_t i = 0; i < u; i++) {
        const float *r = modattn__store_vectors_find(v, ids[i]);
        if (!r) continue;
        memcpy(d + m * out->ld, r, out->ld * sizeof(float));
        oi[m++] = ids[i];
    }
    if (m) {
        out->nseg = 1;
        out->seg[0] = (modattn_store_vector_segment){d, oi, m, 0};
        out->data = d;
        out->chunk_ids = oi;
        out->n = out->rows = m;
    }
    *data = d;
    *out_ids = oi;
    return 0;
}

/* Every rank: 0, or 1 after a failure somewhere (rank 0 has said what; MPI_Allreduce of it). */
static int all_ok(int failed) {
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static int search_mpi(cli_globals *g, int rank, int size, int argc, char **argv) {
    const bool say = rank == 0;
    /* options: those of `modattn search` (cli/cli_search_args.c) */
    cli_search_args args;
    int prc = cli_search_parse(argc, argv, say, &args);
    if (!prc && args.sp.index == MODATTN_SEARCH_INDEX_ANN) {
        if (say) fprintf(stderr, "modattn: search: --ann: search --mpi scans every shard's vectors exactly (no ANN index)\n");
        prc = 2;
    }
    if (!prc && (args.sp.mode == MODATTN_SEARCH_SPARSE || args.sparse_dir)) {
        if (say) fprintf(stderr, "modattn: search: --mode sparse / --sparse: search --mpi ranks by meaning and words only\n");
        prc = 2;
    }
    if (prc) {
        cli_search_args_free(&args);
        return prc == 3 ? 2 : prc < 0 ? 0 : prc;
    }
    /* --exact is what the ranks do anyway; --ann-params were checked and are not used */
    const char *const db = args.db, *model_dir = args.model_dir, *const queries_file = args.queries_file;
    const bool json = args.json;
    const long long k = args.k;
    modattn_search_params sp = args.sp;
    sp.index = MODATTN_SEARCH_INDEX_EXACT;
    sp.ann = NULL;
    char *query = args.query;
    char **qs = &query;
    size_t nq = 1;
    int rc = 0, st = 0, failed = 0;
    if (queries_file) { /* rank 0 reads the queries; the others need only their count */
        free(query);
        query = NULL;
        qs = NULL;
        nq = 0;
        if (rank == 0 && (rc = cli_read_queries(queries_file, &qs, &nq))) failed = 1;
        uint64_t n = nq;
        MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        if (all_ok(failed)) return rc ? rc : 1;
        nq = (size_t)n;
    }
    sp.k = (size_t)k;
    const size_t cand = sp.mode != MODATTN_SEARCH_HYBRID ? sp.k : (sp.k > 50 ? sp.k : 50);
    const bool vectors = sp.mode != MODATTN_SEARCH_KEYWORD;
    modattn_store *store = NULL;
    modattn_model *model = NULL;
    modattn_ctx *ctx = NULL;
    modattn_store_vectors v, slice, sub;
    memset(&v, 0, sizeof v);
    memset(&sub, 0, sizeof sub);
    float *q = NULL, *qn = NULL, *sub_data = NULL, *sc = NULL, *all_sc = NULL;
    int64_t *ids = NULL, *all_ids = NULL, *sub_ids = NULL, *pick = NULL;
    int *counts = NULL, *all_counts = NULL, *displs = NULL;
    mcand *merged = NULL;
    modattn_search_result **res = NULL;
    size_t *nres = NULL;
    modattn_search_notes *notes = NULL;
    uint64_t dim = 0;

    /* every rank opens the store; rank 0 checks its model and embeds the queries */
    if ((st = modattn_store_open(db, MODATTN_STORE_READONLY, &store))) {
        char w[64];
        snprintf(w, sizeof w, "search --mpi (rank %d): opening the store", rank);
        rc = cli_fail(w, st);
        failed = 1;
    }
    g->few_inputs = nq <= 8;
    if (!failed && cli_open_ctx(g, &ctx)) failed = 1, rc = 1; /* every rank: the scan's threads */
    if (!failed && rank == 0) {
        if (modattn_store_note(store)) fprintf(stderr, "modattn: note: %s\n", modattn_store_note(store));
        char mbuf[PATH_MAX + 64];
        if ((st = cli_load_model(g, ctx, cli_model_dir_for_store(model_dir, store, NULL, mbuf, sizeof mbuf), &model)))
            failed = 1, rc = cli_fail("loading the model", st);
        if (!failed) {
            /* the query prompt and the store's dimensions, as a plain search (modattn_store_embed_options) */
            modattn_embed_options eo;
            modattn_store_model sm;
            if ((rc = cli_prompt_check("search", model, &args.eo, true))) failed = 1;
            else if ((st = modattn_store_embed_options(store, model, &args.eo, true, &eo, &sm)))
                failed = 1, rc = cli_fail("search", st);
            dim = failed ? 0 : sm.dim;
            q = failed ? NULL : calloc(nq * dim, sizeof *q);
            qn = failed ? NULL : calloc(nq * dim, sizeof *qn);
            if (failed) {
                /* said */
            } else if (!q || !qn) failed = 1, rc = cli_fail("search", MODATTN_ENOMEM);
            else if ((st = modattn_store_check_model(store, &sm))) failed = 1, rc = cli_fail("search", st);
            else if (vectors && (st = modattn_model_embed_opt(model, NULL, &eo, (const char *const *)qs, NULL, nq, q, NULL)))
                failed = 1, rc = cli_fail("search: embedding the queries", st);
            if (!failed) {
                memcpy(qn, q, nq * dim * sizeof *q);
                for (size_t i = 0; i < nq; i++) modattn__vec_normalize(qn + i * dim, dim);
            }
        }
    }
    if (all_ok(failed)) goto out;
    MPI_Bcast(&dim, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0 && !(qn = calloc(nq * dim + 1, sizeof *qn))) failed = 1, rc = cli_fail("search --mpi", MODATTN_ENOMEM);
    if (all_ok(failed)) goto out;
    if (vectors) MPI_Bcast(qn, (int)(nq * dim), MPI_FLOAT, 0, MPI_COMM_WORLD);

    /* scatter: each rank its slice of the rows, each query's best `cand` */
    ids = calloc(nq * cand + 1, sizeof *ids);
    sc = calloc(nq * cand + 1, sizeof *sc);
    counts = calloc(nq + 1, sizeof *counts);
    if (!ids || !sc || !counts) failed = 1, rc = cli_fail("search --mpi", MODATTN_ENOMEM);
    uint64_t gen = 0;
    if (!failed && vectors) {
        if ((st = modattn__store_open_vectors(store, &v))) {
            char w[64];
            snprintf(w, sizeof w, "search --mpi (rank %d): the vectors", rank);
            failed = 1, rc = cli_fail(w, st);
        } else {
            v.dim = dim;
            gen = v.generation;
            slice_of(&v, v.rows * (size_t)rank / (size_t)size, v.rows * (size_t)(rank + 1) / (size_t)size, &slice);
            for (size_t i = 0; i < nq && !failed; i++) {
                size_t got = 0;
                if ((st = modattn__store_vectors_topk(&slice, qn + i * dim, cand, modattn_ctx_exec(ctx), ids + i * cand,
                                                     sc + i * cand, &got)))
                    failed = 1, rc = cli_fail("search --mpi: the scan", st);
                counts[i] = (int)got;
            }
        }
    }
    if (all_ok(failed)) goto out;
    /* every rank must have scanned the same generation of the store */
    uint64_t gmin = gen, gmax = gen;
    MPI_Allreduce(&gen, &gmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&gen, &gmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (gmin != gmax) {
        if (rank == 0)
            fprintf(stderr, "modattn: search --mpi: the store changed while the ranks opened it (an index ran): run "
                            "the search again\n");
        rc = 1;
        goto out;
    }
    /* gather: every rank's candidates to rank 0 */
    if (rank == 0) {
        all_counts = calloc((size_t)size * nq + 1, sizeof *all_counts);
        displs = calloc((size_t)size + 1, sizeof *displs);
        all_ids = calloc((size_t)size * nq * cand + 1, sizeof *all_ids);
        all_sc = calloc((size_t)size * nq * cand + 1, sizeof *all_sc);
        if (!all_counts || !displs || !all_ids || !all_sc) failed = 1, rc = cli_fail("search --mpi", MODATTN_ENOMEM);
    }
    if (all_ok(failed)) goto out;
    MPI_Gather(counts, (int)nq, MPI_INT, all_counts, (int)nq, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(ids, (int)(nq * cand), MPI_INT64_T, all_ids, (int)(nq * cand), MPI_INT64_T, 0, MPI_COMM_WORLD);
    MPI_Gather(sc, (int)(nq * cand), MPI_FLOAT, all_sc, (int)(nq * cand), MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank != 0) goto out;

    /* rank 0: the best `cand` of all, the keyword candidates, and the plain search over their vectors */
    if (!vectors) v.dim = dim;
    if (v.note[0]) {
        char nbuf[4 * sizeof v.note];
        fprintf(stderr, "modattn: note: searching the store itself (slower): %s; `modattn index` rewrites the vector file\n",
                cli_term_text(v.note, nbuf, sizeof nbuf));
    }
    res = calloc(nq, sizeof *res);
    nres = calloc(nq, sizeof *nres);
    notes = calloc(nq, sizeof *notes);
    merged = calloc((size_t)size * cand + 1, sizeof *merged);
    pick = calloc(2 * cand + 1, sizeof *pick);
    if (!res || !nres || !notes || !merged || !pick) {
        rc = cli_fail("search --mpi", MODATTN_ENOMEM);
        goto out;
    }
    const bool keywords = modattn__store_has_keywords(store);
    for (size_t i = 0; i < nq && !rc; i++) {
        size_t nm = 0, np = 0;
        for (int r = 0; r < size; r++)
            for (int j = 0; j < all_counts[(size_t)r * nq + i]; j++) {
                size_t at = ((size_t)r * nq + i) * cand + (size_t)j;
                merged[nm++] = (mcand){all_sc[at], all_ids[at]};
            }
        qsort(merged, nm, sizeof *merged, cand_cmp);
        for (size_t j = 0; j < nm && j < cand; j++) pick[np++] = merged[j].id;
        /* the keyword ranking's candidates, so that their cosines are there as in a plain search */
        char *fts = NULL;
        if (vectors && sp.mode == MODATTN_SEARCH_HYBRID && keywords &&
            (st = modattn__store_keyword_query(store, qs[i], strlen(qs[i]), &fts, NULL)) == 0 && fts && fts[0]) {
            size_t nk = 0;
            double *ksc = calloc(cand + 1, sizeof *ksc);
            if (!ksc) st = MODATTN_ENOMEM;
            else st = modattn__store_keyword_topk(store, fts, cand, NULL, pick + np, ksc, &nk);
            np += nk;
            free(ksc);
        }
        modattn_free(fts);
        if (st) {
            rc = cli_fail("search --mpi: the keyword candidates", st);
            break;
        }
        modattn_free(sub_data);
        modattn_free(sub_ids);
        if ((st = subset_of(&v, pick, np, &sub, &sub_data, &sub_ids)) ||
            (st = modattn__search_run(store, &sub, q + i * dim, qs[i], strlen(qs[i]), &sp, modattn_ctx_exec(ctx), &res[i],
                                     &nres[i], &notes[i])) ||
            /* the snippets as a plain search chooses them (the meaning weight on this rank's model) */
            (vectors && (st = modattn__search_snippets(model, qs[i], strlen(qs[i]), res[i], nres[i])))) {
            rc = cli_fail(queries_file ? "search --mpi: a query" : "search", st);
            break;
        }
    }
    char nbuf[4 * sizeof notes[0].note];
    for (size_t i = 0; i < nq && !rc; i++) {
        if (notes[i].note[0]) {
            if (queries_file) fprintf(stderr, "modattn: note: query %zu: %s\n", i + 1, cli_term_text(notes[i].note, nbuf, sizeof nbuf));
            else fprintf(stderr, "modattn: note: %s\n", cli_term_text(notes[i].note, nbuf, sizeof nbuf));
        }
        /* as `modattn search` says what found the candidates by meaning: an exact scan, always */
        modattn_search_info info;
        memset(&info, 0, sizeof info);
        if (sp.mode != MODATTN_SEARCH_KEYWORD) snprintf(info.index, sizeof info.index, "exact");
        rc = cli_search_print(&sp, &info, res[i], nres[i], json, 0, i + 1, queries_file ? qs[i] : NULL);
    }
    if (cli_stdout_check()) rc = 1;
out:
    for (size_t i = 0; res && nres && i < nq; i++) modattn_search_results_free(res[i], nres[i]);
    free(res);
    free(nres);
    free(notes);
    free(merged);
    free(pick);
    modattn_free(sub_data);
    modattn_free(sub_ids);
    free(q);
    free(qn);
    free(ids);
    free(sc);
    free(counts);
    free(all_counts);
    free(displs);
    free(all_ids);
    free(all_sc);
    modattn__store_vectors_free(&v);
    modattn_model_free(model);
    modattn_store_close(store);
    if (queries_file) {
        for (size_t i = 0; qs && i < nq; i++) modattn_free(qs[i]);
        modattn_free(qs);
    }
    free(query);
    return rc;
}

int cli_cmd_search_mpi(cli_globals *g, int argc, char **argv) {
    cli_mpi_run m;
    if (cli_mpi_begin(g, "search", cli_cmd_search, argc, argv, &m)) return m.rc;
    int rc = search_mpi(g, m.rank, m.size, m.ac, m.av);
    cli_mpi_end(&m);
    return rc;
}

#endif
