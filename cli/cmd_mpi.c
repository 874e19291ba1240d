/* cli/cmd_mpi.c — `mpirun -np N modattn index --mpi ...`: the embedding spread over N processes,
 * one store written by one of them (rank 0), exactly as a plain `modattn index` writes it.
 *
 * Why one writer and not per-rank shard stores merged at the end: SQLite wants one writer; a
 * merge would rewrite every row a second time and, to give the chunk ids a plain run gives (ties
 * in search are broken by chunk id), would have to replay the plain run's order anyway; and a
 * document is in the store as soon as it is written, so a run that dies keeps what was done
 * (shards would keep it too, but only a merge makes it searchable). The cost: rank 0 reads,
 * extracts and chunks every document again to write it (the tokenizer, not the model: a few per
 * cent of the embedding), which keeps a single code path for what is stored.
 *
 * The run (the indexer's stages, pipeline/indexer_stages.h; the options, the messages and the
 * summary are the plain command's: cli/cli_index_args.c, cli/cmd_index.c, cli/cli_index_out.c):
 *   1. rank 0 plans (modattn__index_plan): the same walk and the same decisions as a plain run
 *      (unchanged by size and mtime, then by content hash) list the files to embed; the store is
 *      not changed;
 *   2. the list is split over the ranks balanced by bytes: in the run's order, each file goes to
 *      the rank with the fewest bytes so far (ties: the lower rank), so that every rank's share
 *      is spread along the order in which rank 0 writes (deterministic: the same list, the same
 *      split);
 *   3. every rank embeds its share (read, extract, chunk, embed, as a plain run) and its sink
 *      sends each document's vectors to rank 0 (non-blocking: a rank never waits for the writer);
 *   4. rank 0 runs the plain index over the same paths (its embed stage told which documents
 *      are remote), embedding its own share and taking the others' vectors when a document's turn
 *      to be written comes, checked against the content it read (hash and chunk count; a
 *      mismatch, or a document that never came, is embedded on rank 0). Each document is one
 *      transaction, in the plain run's order; then the vector file, the ANN index, the roots and
 *      the model folder recorded, and the summary, as the plain command does them.
 * A rank that dies: mpirun ends the others (rank 0 says so on stderr); what rank 0 committed is
 * whole documents, and the next run skips them (they are unchanged).
 *
 * search --mpi is in cli/cmd_mpi_search.c. Without MPI (cmake/mpi.cmake found none) both commands
 * say how to install it. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_internal.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "core/env.h"
#include "pipeline/indexer_stages.h"

#ifndef MODATTN_HAVE_MPI

int cli_cmd_index_mpi(cli_globals *g, int argc, char **argv) {
    (void)g, (void)argc, (void)argv;
    return cli_mpi_missing("index");
}

#else

#include <mpi.h>
#include <xxhash.h>

/* ---- messages: a worker's document to rank 0 (TAG_DOC), its end (TAG_END) */
enum { TAG_DOC = 11, TAG_END = 12 };

typedef struct doc_head {
    uint64_t hash, nchunks, dim, pathlen;
} doc_head;

/* a document another rank embedded, waiting for its turn (rank 0) */
typedef struct arrived {
    char *path;
    doc_head h;
    unsigned char *buf; /* the whole message: head, path, vectors, word pieces */
    struct arrived *next;
} arrived;

typedef struct mpi_index {
    int rank, size;
    /* the plan (every rank): paths in order, their owners */
    char **plan;
    int32_t *owner;
    uint64_t *sizes; /* rank 0 */
    size_t nplan;
    /* rank 0 */
    size_t *by_path; /* plan indices sorted by path */
    arrived *got;    /* received, not yet taken */
    bool *ended;     /* [size]: the rank's TAG_END came */
    int nended;
    uint64_t fetched, refetched; /* taken; embedded here after all */
    /* workers */
    MPI_Request *reqs;
    unsigned char **bufs;
    size_t nreq, reqcap;
    uint64_t emitted;
    long die_after; /* MODATTN_TEST_MPI_DIE_AFTER: rank 1 kills itself after this many (tests) */
    uint64_t planned_bytes;
} mpi_index;

static int plan_add(void *ud, const char *path, uint64_t size) {
    mpi_index *m = ud;
    char **np = realloc(m->plan, (m->nplan + 1) * sizeof *np);
    int32_t *no = realloc(m->owner, (m->nplan + 1) * sizeof *no);
    uint64_t *ns = realloc(m->sizes, (m->nplan + 1) * sizeof *ns);
    if (np) m->plan = np;
    if (no) m->owner = no;
    if (ns) m->sizes = ns;
    if (!np || !no || !ns || !(m->plan[m->nplan] = strdup(path)))
        return modattn__error(MODATTN_ENOMEM, "index --mpi: the plan");
    m->owner[m->nplan] = 0; /* chosen when the plan is complete */
    m->sizes[m->nplan] = size;
    m->nplan++;
    m->planned_bytes += size;
    return 0;
}

/* in the run's order, each file to the rank with the fewest bytes so far (ties: the lower) */
static void assign(mpi_index *m) {
    const uint64_t *sizes = m->sizes;
    uint64_t *load = calloc((size_t)m->size, sizeof *load);
    if (!load) return;
    for (size_t i = 0; i < m->nplan; i++) {
        int best = 0;
        for (int r = 1; r < m->size; r++)
            if (load[r] < load[best]) best = r;
        load[best] += sizes[i] ? sizes[i] : 1;
        m->owner[i] = best;
    }
    free(load);
}

static mpi_index *g_sort_m;
static int cmp_plan_path(const void *a, const void *b) {
    return strcmp(g_sort_m->plan[*(const size_t *)a], g_sort_m->plan[*(const size_t *)b]);
}

static long plan_find(const mpi_index *m, const char *path) {
    size_t lo = 0, hi = m->nplan;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->plan[m->by_path[mid]], path);
        if (c == 0) return (long)m->by_path[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* Rank 0 shares the plan and its split: the paths (NUL-separated) and the owners. */
static int share_plan(mpi_index *m) {
    uint64_t n[2] = {m->nplan, 0};
    char *blob = NULL;
    if (m->rank == 0) {
        for (size_t i = 0; i < m->nplan; i++) n[1] += strlen(m->plan[i]) + 1;
    }
    MPI_Bcast(n, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (n[0] == UINT64_MAX) return 1; /* rank 0 failed: it says why */
    if (!(blob = malloc(n[1] + 1))) return modattn__error(MODATTN_ENOMEM, "index --mpi: the plan");
    if (m->rank == 0) {
        size_t o = 0;
        for (size_t i = 0; i < m->nplan; i++) {
            size_t l = strlen(m->plan[i]) + 1;
            memcpy(blob + o, m->plan[i], l);
            o += l;
        }
    } else {
        m->nplan = (size_t)n[0];
        m->plan = calloc(m->nplan + 1, sizeof *m->plan);
        m->owner = calloc(m->nplan + 1, sizeof *m->owner);
    }
    for (uint64_t off = 0; off < n[1]; off += (uint64_t)1 << 30) { /* MPI counts are int */
        uint64_t len = n[1] - off < ((uint64_t)1 << 30) ? n[1] - off : ((uint64_t)1 << 30);
        MPI_Bcast(blob + off, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
    }
    MPI_Bcast(m->owner, (int)m->nplan, MPI_INT32_T, 0, MPI_COMM_WORLD);
    if (m->rank != 0) {
        size_t o = 0;
        for (size_t i = 0; i < m->nplan; i++) {
            m->plan[i] = strdup(blob + o);
            o += strlen(blob + o) + 1;
        }
    }
    free(blob);
    return 0;
}

/* ---- rank 0: take what the others sent */

static int receive_one(mpi_index *m, MPI_Status *s) {
    int count = 0;
    MPI_Get_count(s, MPI_BYTE, &count);
    unsigned char *buf = malloc(count > 0 ? (size_t)count : 1);
    if (!buf) return modattn__error(MODATTN_ENOMEM, "index --mpi: a document's vectors from rank %d", s->MPI_SOURCE);
    MPI_Recv(buf, count, MPI_BYTE, s->MPI_SOURCE, s->MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (s->MPI_TAG == TAG_END) {
        free(buf);
        if (!m->ended[s->MPI_SOURCE]) m->nended++;
        m->ended[s->MPI_SOURCE] = true;
        return 0;
    }
    arrived *a = calloc(1, sizeof *a);
    if (!a) {
        free(buf);
        return modattn__error(MODATTN_ENOMEM, "index --mpi: a document from rank %d", s->MPI_SOURCE);
    }
    memcpy(&a->h, buf, sizeof a->h);
    if ((size_t)count < sizeof a->h + a->h.pathlen + 1) {
        free(buf);
        free(a);
        return modattn__error(MODATTN_EIO, "index --mpi: a damaged message from rank %d", s->MPI_SOURCE);
    }
    a->path = (char *)buf + sizeof a->h;
    a->buf = buf;
    a->next = m->got;
    m->got = a;
    return 0;
}

/* every message there now (block: at least one) */
static int receive_some(mpi_index *m, bool block) {
    for (;;) {
        int flag = 0;
        MPI_Status s;
        if (block) {
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &s);
            flag = 1;
            block = false;
        } else {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &s);
        }
        if (!flag) return 0;
        int st = receive_one(m, &s);
        if (st) return st;
    }
}

static int is_remote(void *ud, const char *path) {
    mpi_index *m = ud;
    long i = plan_find(m, path);
    return i >= 0 && m->owner[i] != 0;
}

static int fetch(void *ud, const char *path, uint64_t hash, size_t nchunks, size_t dim, float *vecs, int32_t *ntok,
                 bool wait) {
    mpi_index *m = ud;
    long i = plan_find(m, path);
    if (i < 0) return 2;
    const int owner = m->owner[i];
    for (bool first = true;; first = false) {
        int st = receive_some(m, wait && !first);
        if (st) return st;
        for (arrived **pp = &m->got; *pp; pp = &(*pp)->next) {
            arrived *a = *pp;
            if (strcmp(a->path, path) != 0) continue;
            *pp = a->next;
            int ok = a->h.hash == hash && a->h.nchunks == nchunks && a->h.dim == dim;
            if (ok) {
                size_t off = sizeof a->h + a->h.pathlen + 1;
                off = (off + 3) & ~(size_t)3;
                memcpy(vecs, a->buf + off, nchunks * dim * sizeof(float));
                memcpy(ntok, a->buf + off + nchunks * dim * sizeof(float), nchunks * sizeof(int32_t));
                m->fetched++;
            } else {
                m->refetched++; /* the file changed between the two reads: embedded here */
            }
            free(a->buf);
            free(a);
            return ok ? 1 : 2;
        }
        if (m->ended[owner]) { /* it will not come (its rank could not read it as a document) */
            m->refetched++;
            return 2;
        }
        if (!wait) return 0;
    }
}

/* ---- workers: send each document as it is done, never waiting for rank 0 */

static void reap(mpi_index *m, bool all) {
    size_t w = 0;
    for (size_t i = 0; i < m->nreq; i++) {
        int done = 0;
        if (all) MPI_Wait(&m->reqs[i], MPI_STATUS_IGNORE), done = 1;
        else MPI_Test(&m->reqs[i], &done, MPI_STATUS_IGNORE);
        if (done) {
            free(m->bufs[i]);
            continue;
        }
        m->reqs[w] = m->reqs[i];
        m->bufs[w++] = m->bufs[i];
    }
    m->nreq = w;
}

/* the workers' sink: each document's vectors to rank 0 */
static int emit(void *ud, const modattn__index_doc *doc) {
    mpi_index *m = ud;
    const char *path = doc->path;
    const size_t nchunks = doc->nchunks, dim = doc->dim;
    const float *vecs = doc->vecs;
    const int32_t *ntok = doc->ntok;
    doc_head h = {doc->hash, nchunks, dim, strlen(path)};
    size_t off = sizeof h + h.pathlen + 1;
    off = (off + 3) & ~(size_t)3;
    size_t total = off + nchunks * dim * sizeof(float) + nchunks * sizeof(int32_t);
    if (total > INT_MAX) return modattn__error(MODATTN_ERANGE, "index --mpi: %s: %zu chunks are too many for one message", path, nchunks);
    unsigned char *buf = calloc(1, total);
    if (!buf) return modattn__error(MODATTN_ENOMEM, "index --mpi: sending %s", path);
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, path, h.pathlen + 1);
    memcpy(buf + off, vecs, nchunks * dim * sizeof(float));
    memcpy(buf + off + nchunks * dim * sizeof(float), ntok, nchunks * sizeof(int32_t));
    reap(m, false);
    if (m->nreq == m->reqcap) {
        size_t nc = m->reqcap ? 2 * m->reqcap : 64;
        MPI_Request *nr = realloc(m->reqs, nc * sizeof *nr);
        if (nr) m->reqs = nr;
        unsigned char **nb = realloc(m->bufs, nc * sizeof *nb);
        if (nb) m->bufs = nb;
        if (!nr || !nb) {
            free(buf);
            return modattn__error(MODATTN_ENOMEM, "index --mpi: sending %s", path);
        }
        m->reqcap = nc;
    }
    MPI_Isend(buf, (int)total, MPI_BYTE, 0, TAG_DOC, MPI_COMM_WORLD, &m->reqs[m->nreq]);
    m->bufs[m->nreq++] = buf;
    m->emitted++;
    if (m->die_after > 0 && m->rank == 1 && m->emitted == (uint64_t)m->die_after) {
        /* tests: a rank that dies mid-run, once what it sent has arrived */
        reap(m, true);
        fprintf(stderr, "modattn: index --mpi (rank 1): MODATTN_TEST_MPI_DIE_AFTER=%ld: killing myself\n", m->die_after);
        fflush(stderr);
        sleep(1);
        raise(SIGKILL);
    }
    return 0;
}

/* ---- rank 0's messages, as cli/cmd_index.c prints them */

static void on_term(int sig) {
    static const char msg[] =
        "modattn: index --mpi (rank 0): stopped by a signal, most likely because another rank died (mpirun says "
        "which). The store holds whole documents only: run the same command again to index what is left.\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void free_mpi_index(mpi_index *m) {
    for (size_t i = 0; i < m->nplan; i++) free(m->plan[i]);
    free(m->plan);
    free(m->owner);
    free(m->sizes);
    free(m->by_path);
    while (m->got) {
        arrived *n = m->got->next;
        free(m->got->buf);
        free(m->got);
        m->got = n;
    }
    free(m->ended);
    for (size_t i = 0; i < m->nreq; i++) free(m->bufs[i]);
    free(m->reqs);
    free(m->bufs);
}

/* A failure on one rank ends them all: the others may be waiting for it. */
static int fail_all(int rank, const char *what, int st) {
    char w[128];
    snprintf(w, sizeof w, "index --mpi (rank %d): %s", rank, what);
    cli_fail(w, st);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* A worker: embed this rank's share of the plan, each document's vectors sent to rank 0. */
static int index_worker(const cli_index_args *a, mpi_index *m, cli_index_job *j, uint64_t t0) {
    int st, rank = m->rank;
    if ((st = share_plan(m))) return fail_all(rank, "sharing the plan", st);
    const char **mine = calloc(m->nplan + 1, sizeof *mine);
    size_t nmine = 0;
    if (!mine) return fail_all(rank, "the plan", MODATTN_ENOMEM);
    for (size_t i = 0; i < m->nplan; i++)
        if (m->owner[i] == rank) mine[nmine++] = m->plan[i];
    modattn_index_options o; /* the plain run's options; its events are rank 0's to say */
    cli_index_options(a, &o);
    o.ann_exec = modattn_ctx_exec(j->ctx);
    modattn__index_stages emb = {.sink = emit, .ud = m};
    if (nmine && (st = modattn__index_run(NULL, j->model, mine, nmine, &o, &emb, &j->s)))
        return fail_all(rank, "embedding", st);
    free(mine);
    int end = 0;
    MPI_Send(&end, 1, MPI_INT, 0, TAG_END, MPI_COMM_WORLD);
    reap(m, true);
    if (modattn__env_bool("MODATTN_MPI_VERBOSE", false))
        fprintf(stderr, "modattn: index --mpi (rank %d): embedded %llu documents (%llu chunks) in %.2f s\n", rank,
                (unsigned long long)m->emitted, (unsigned long long)j->s.chunks_embedded,
                (double)(modattn__now_ns() - t0) * 1e-9);
    return 0;
}

/* Rank 0: the plan and its split, then the plain run, other ranks' vectors taken in their turn,
 * then what the plain command does after it (roots, model folder, ANN index, summary). */
static int index_rank0(const cli_index_args *a, mpi_index *m, cli_index_job *j, uint64_t t0) {
    int st;
    if ((st = cli_index_open_store(a, j))) return fail_all(0, "opening the store", st);
    /* 1-2. the plan (it says nothing: its events are the run's), its split, shared */
    modattn_index_options po = j->o;
    po.on_event = NULL;
    po.on_progress = NULL;
    if ((st = modattn__index_plan(j->store, j->model, a->paths, a->npaths, &po, plan_add, m, &j->s)))
        return fail_all(0, "planning", st);
    assign(m);
    if ((st = share_plan(m))) return fail_all(0, "sharing the plan", st);
    /* 4. the plain run, other ranks' documents fetched */
    signal(SIGTERM, on_term); /* mpirun ends us when another rank dies: say what that means */
    m->ended = calloc((size_t)m->size, sizeof *m->ended);
    m->by_path = calloc(m->nplan + 1, sizeof *m->by_path);
    if (!m->ended || !m->by_path) return fail_all(0, "the plan", MODATTN_ENOMEM);
    for (size_t i = 0; i < m->nplan; i++) m->by_path[i] = i;
    g_sort_m = m;
    qsort(m->by_path, m->nplan, sizeof *m->by_path, cmp_plan_path);
    modattn__index_stages wr = {.remote = is_remote, .fetch = fetch, .ud = m};
    if ((st = modattn__index_run(j->store, j->model, a->paths, a->npaths, &j->o, &wr, &j->s)))
        return fail_all(0, "index", st);
    /* the ends of every rank (and anything sent that was not taken), so that their sends complete */
    while (m->nended < m->size - 1)
        if ((st = receive_some(m, true))) return fail_all(0, "receiving", st);
    j->secs = (double)(modattn__now_ns() - t0) * 1e-9;
    cli_index_finish(a, j);
    int rc = cli_index_print(a, j, m->size);
    if (!j->st && modattn__env_bool("MODATTN_MPI_VERBOSE", false))
        fprintf(stderr, "modattn: index --mpi (rank 0): %zu documents planned (%llu bytes), %llu taken from "
                        "other ranks, %llu embedded here after all\n", m->nplan,
                (unsigned long long)m->planned_bytes, (unsigned long long)m->fetched,
                (unsigned long long)m->refetched);
    signal(SIGTERM, SIG_DFL);
    return rc;
}

int cli_cmd_index_mpi(cli_globals *g, int argc, char **argv) {
    cli_mpi_run mr;
    if (cli_mpi_begin(g, "index", cli_cmd_index, argc, argv, &mr)) return mr.rc;
    /* the plain command's options, read the same way by every rank (rank 0 says what is wrong) */
    cli_index_args a;
    int rc = cli_index_parse(mr.ac, mr.av, mr.rank == 0, &a);
    if (!rc && a.sparse_dir) { /* the split run carries dense vectors only (the library refuses it too) */
        if (mr.rank == 0) fprintf(stderr, "modattn: index: --sparse is not available with --mpi: index without --mpi\n");
        rc = 2;
    }
    if (!rc) rc = cli_index_roots(&a, mr.rank == 0);
    if (rc == -1 && mr.rank == 0) cli_index_usage(stdout);
    if (!rc && a.npaths == 0 && mr.rank == 0) /* --ann with no PATH: only the index is built: rank 0 */
        rc = cli_cmd_index(g, mr.ac, mr.av);
    if (rc || a.npaths == 0) {
        cli_index_args_free(&a);
        cli_mpi_end(&mr);
        return rc < 0 ? 0 : rc;
    }
    mpi_index m;
    memset(&m, 0, sizeof m);
    m.rank = mr.rank;
    m.size = mr.size;
    {
        const char *e = getenv("MODATTN_TEST_MPI_DIE_AFTER");
        m.die_after = e ? strtol(e, NULL, 10) : 0;
    }
    cli_index_job j;
    memset(&j, 0, sizeof j);
    const char *what;
    int st = cli_index_load(g, &a, &j, &what);
    if (st) return fail_all(m.rank, what ? what : "starting", st);
    uint64_t t0 = modattn__now_ns();
    rc = m.rank == 0 ? index_rank0(&a, &m, &j, t0) : index_worker(&a, &m, &j, t0);
    free_mpi_index(&m);
    cli_index_job_free(&j);
    cli_index_args_free(&a);
    cli_mpi_end(&mr);
    return rc;
}

#endif
