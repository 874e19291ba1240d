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
 * The run (pipeline/indexer.c, modattn_index_paths_split):
 *   1. rank 0 plans: the same walk and the same decisions as a plain run (unchanged by size and
 *      mtime, then by content hash) list the files to embed; the store is not changed;
 *   2. the list is split over the ranks balanced by bytes: in the run's order, each file goes to
 *      the rank with the fewest bytes so far (ties: the lower rank), so that every rank's share
 *      is spread along the order in which rank 0 writes (deterministic: the same list, the same
 *      split);
 *   3. every rank embeds its share (read, extract, chunk, embed, as a plain run) and sends each
 *      document's vectors to rank 0 (non-blocking: a rank never waits for the writer);
 *   4. rank 0 runs the plain index over the same paths, embedding its own share and taking the
 *      others' vectors when a document's turn to be written comes, checked against the content
 *      it read (hash and chunk count; a mismatch, or a document that never came, is embedded on
 *      rank 0). Each document is one transaction, in the plain run's order; then the vector file.
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
#include "core/env.h"

bool cli_has_arg(int argc, char **argv, const char *arg) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) return false;
        if (strcmp(argv[i], arg) == 0) return true;
    }
    return false;
}

int cli_mpi_missing(const char *cmd) {
    fprintf(stderr,
            "modattn: %s --mpi: this modattn was built without MPI.\n"
            "  Install it (Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin), rebuild (make build,\n"
            "  or cmake again: MPI is found by itself; -DMODATTN_MPI=ON makes it required), then run e.g.\n"
            "  mpirun -np 2 modattn %s --mpi ...\n"
            "  Without --mpi, `modattn %s` works as it is.\n",
            cmd, cmd, cmd);
    return 1;
}

#ifndef MODATTN_HAVE_MPI

int cli_cmd_index_mpi(cli_globals *g, int argc, char **argv) {
    (void)g, (void)argc, (void)argv;
    return cli_mpi_missing("index");
}

#else

#include <mpi.h>
#include <xxhash.h>

/* argv without "--mpi" (before a "--"), in new; returns the new argc */
int cli_mpi_strip(int argc, char **argv, char **out) {
    int n = 0;
    bool dd = false;
    for (int i = 0; i < argc; i++) {
        if (!dd && strcmp(argv[i], "--") == 0) dd = true;
        if (!dd && i > 0 && strcmp(argv[i], "--mpi") == 0) continue;
        out[n++] = argv[i];
    }
    out[n] = NULL;
    return n;
}

int cli_mpi_init(const char *cmd, int *rank, int *size) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        /* only this thread calls MPI; the thread pool's workers never do */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "modattn: %s --mpi: MPI_Init failed (run it as mpirun -np N modattn %s --mpi ...)\n", cmd,
                    cmd);
            return -1;
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

/* ---- options: those of `modattn index` (cli/cmd_index.c), parsed the same way by every rank */

typedef struct index_args {
    const char *db, *model_dir;
    bool json, quiet, prune;
    double wait_s, file_timeout_s;
    long long chunk_tokens, overlap, batch;
    int64_t max_size;
    const char **paths;
    size_t npaths;
} index_args;


/* 0, or the exit status of a usage error (said on stderr by rank 0 only) */
static int parse_index_args(int argc, char **argv, index_args *a, bool say) {
    memset(a, 0, sizeof *a);
    a->db = MODATTN_STORE_DEFAULT_PATH;
    a->wait_s = MODATTN_STORE_DEFAULT_WAIT_S;
    a->file_timeout_s = MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S;
    a->overlap = -1;
    a->paths = calloc((size_t)argc + 1, sizeof *a->paths);
    if (!a->paths) return 1;
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v;
        bool missing = false, bad = false;
        if (dashdash || s[0] != '-' || s[1] == '\0') {
            a->paths[a->npaths++] = s;
            continue;
        }
        if (strcmp(s, "--") == 0) dashdash = true;
        else if (strcmp(s, "--json") == 0) a->json = true;
        else if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0) a->quiet = true;
        else if (strcmp(s, "--prune") == 0) a->prune = true;
        else if ((v = cli_opt_value(argc, argv, &i, "--db", &missing))) a->db = v;
        else if ((v = cli_opt_value(argc, argv, &i, "--model", &missing))) a->model_dir = v;
        else if ((v = cli_opt_value(argc, argv, &i, "--chunk-tokens", &missing))) bad = cli_parse_ll("index --chunk-tokens", v, 3, 1 << 20, &a->chunk_tokens) != 0;
        else if ((v = cli_opt_value(argc, argv, &i, "--overlap", &missing))) bad = cli_parse_ll("index --overlap", v, 0, 1 << 20, &a->overlap) != 0;
        else if ((v = cli_opt_value(argc, argv, &i, "--batch", &missing))) bad = cli_parse_ll("index --batch", v, 1, 65536, &a->batch) != 0;
        else if ((v = cli_opt_value(argc, argv, &i, "--wait", &missing))) bad = cli_parse_double("index --wait", v, 0, 1e6, false, &a->wait_s) != 0;
        else if ((v = cli_opt_value(argc, argv, &i, "--file-timeout", &missing))) bad = cli_parse_double("index --file-timeout", v, 0, 1e6, false, &a->file_timeout_s) != 0;
        else if ((v = cli_opt_value(argc, argv, &i, "--max-file-size", &missing))) {
            if (modattn_parse_bytes(v, &a->max_size) != 0 || a->max_size <= 0) {
                if (say) fprintf(stderr, "modattn: index: --max-file-size: '%s' is not a size\n", v);
                bad = true;
            }
        } else {
            if (say) fprintf(stderr, missing ? "modattn: index: %s needs a value\n"
                                             : "modattn: index: unknown option '%s' (see modattn index --help)\n", s);
            bad = true;
        }
        if (bad) return 2;
    }
    if (a->npaths == 0) {
        if (say) fprintf(stderr, "modattn: index: no PATH given\n");
        return 2;
    }
    return 0;
}

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
        return modattn_error(MODATTN_ENOMEM, "index --mpi: the plan");
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
    if (!(blob = malloc(n[1] + 1))) return modattn_error(MODATTN_ENOMEM, "index --mpi: the plan");
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
    if (!buf) return modattn_error(MODATTN_ENOMEM, "index --mpi: a document's vectors from rank %d", s->MPI_SOURCE);
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
        return modattn_error(MODATTN_ENOMEM, "index --mpi: a document from rank %d", s->MPI_SOURCE);
    }
    memcpy(&a->h, buf, sizeof a->h);
    if ((size_t)count < sizeof a->h + a->h.pathlen + 1) {
        free(buf);
        free(a);
        return modattn_error(MODATTN_EIO, "index --mpi: a damaged message from rank %d", s->MPI_SOURCE);
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

static int emit(void *ud, const char *path, uint64_t hash, size_t nchunks, size_t dim, const float *vecs,
                const int32_t *ntok) {
    mpi_index *m = ud;
    doc_head h = {hash, nchunks, dim, strlen(path)};
    size_t off = sizeof h + h.pathlen + 1;
    off = (off + 3) & ~(size_t)3;
    size_t total = off + nchunks * dim * sizeof(float) + nchunks * sizeof(int32_t);
    if (total > INT_MAX) return modattn_error(MODATTN_ERANGE, "index --mpi: %s: %zu chunks are too many for one message", path, nchunks);
    unsigned char *buf = calloc(1, total);
    if (!buf) return modattn_error(MODATTN_ENOMEM, "index --mpi: sending %s", path);
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
            return modattn_error(MODATTN_ENOMEM, "index --mpi: sending %s", path);
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

static void print_summary(const index_args *a, const cli_index_ui *ui, const modattn_index_stats *s, double secs,
                          int nranks, int *rc) {
    char dbuf[PATH_MAX], db_shown[4 * PATH_MAX], tvf[4096], vf[400];
    char *abs_db = modattn_path_absolute(a->db);
    const char *db_rel = abs_db ? cli_rel_path(abs_db, dbuf, sizeof dbuf) : a->db;
    if (s->vector_file_error[0]) {
        snprintf(vf, sizeof vf, "not written: %s", s->vector_file_error);
        fprintf(stderr, "modattn: index: warning: the vector file was not written (searches will read the store, "
                        "slower): %s\n", cli_term_text(s->vector_file_error, tvf, sizeof tvf));
    } else snprintf(vf, sizeof vf, "%s", !s->vector_file_written ? "current" : s->vector_file_appended ? "appended" : "written");
    if (a->json) {
        json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:O, s:O, s:i}",
                              "files_seen", (json_int_t)s->files_seen, "files_indexed", (json_int_t)s->files_indexed,
                              "files_unchanged", (json_int_t)s->files_unchanged,
                              "files_skipped", (json_int_t)s->files_skipped, "files_pruned", (json_int_t)s->files_pruned,
                              "chunks_embedded", (json_int_t)s->chunks_embedded,
                              "tokens_embedded", (json_int_t)s->tokens_embedded, "seconds", secs, "db", "",
                              "errors", ui->errors, "skipped", ui->skipped, "ranks", nranks);
        if (j && cli_json_set_path(j, "db", db_rel)) json_decref(j), j = NULL;
        if (j) json_object_set_new(j, "vector_file", cli_json_text(vf));
        if (j && s->vector_file_appended) {
            json_object_set_new(j, "vector_file_rows_added", json_integer((json_int_t)s->vector_file_rows_added));
            json_object_set_new(j, "vector_file_rows_masked", json_integer((json_int_t)s->vector_file_rows_masked));
        }
        if (j && s->vector_file_written && !s->vector_file_appended && s->vector_file_reason[0])
            json_object_set_new(j, "vector_file_reason", cli_json_text(s->vector_file_reason));
        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) : NULL;
        if (modattn_json_take_failure() != 0 || !text) {
            modattn_json_free(text);
            *rc = cli_json_fail("index: writing JSON");
        } else {
            puts(text);
            modattn_json_free(text);
        }
        json_decref(j);
    } else {
        cli_term_text(db_rel, db_shown, sizeof db_shown);
        printf("%s: %llu files seen: %llu indexed (%llu chunks, %llu tokens, %.0f tokens/s), %llu unchanged, "
               "%llu skipped", db_shown, (unsigned long long)s->files_seen, (unsigned long long)s->files_indexed,
               (unsigned long long)s->chunks_embedded, (unsigned long long)s->tokens_embedded,
               secs > 0 ? (double)s->tokens_embedded / secs : 0.0, (unsigned long long)s->files_unchanged,
               (unsigned long long)s->files_skipped);
        if (s->errors) printf(" (%llu unreadable)", (unsigned long long)s->errors);
        if (a->prune) printf(", %llu pruned", (unsigned long long)s->files_pruned);
        printf(" in %.1f s on %d ranks\n", secs, nranks);
    }
    modattn_free(abs_db);
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

int cli_cmd_index_mpi(cli_globals *g, int argc, char **argv) {
    char **av = calloc((size_t)argc + 1, sizeof *av);
    if (!av) return 1;
    int ac = cli_mpi_strip(argc, argv, av), rank = 0, size = 1;
    if (cli_has_arg(ac, av, "-h") || cli_has_arg(ac, av, "--help")) {
        int rc = cli_cmd_index(g, ac, av);
        free(av);
        return rc;
    }
    if (cli_mpi_init("index", &rank, &size) != 0) {
        free(av);
        return 1;
    }
    if (size == 1) { /* one process (mpirun -np 1, or no mpirun): the plain run */
        int rc = cli_cmd_index(g, ac, av);
        MPI_Finalize();
        free(av);
        return rc;
    }
    index_args a;
    int rc = parse_index_args(ac, av, &a, rank == 0);
    if (rc) {
        free(a.paths);
        free(av);
        MPI_Finalize();
        return rc < 0 ? 0 : rc;
    }
    mpi_index m;
    memset(&m, 0, sizeof m);
    m.rank = rank;
    m.size = size;
    {
        const char *e = getenv("MODATTN_TEST_MPI_DIE_AFTER");
        m.die_after = e ? strtol(e, NULL, 10) : 0;
    }
    modattn_ctx *ctx = NULL;
    modattn_model *model = NULL;
    modattn_store *store = NULL;
    char mbuf[PATH_MAX + 64];
    const char *model_dir = cli_model_dir(a.model_dir, mbuf, sizeof mbuf);
    if (cli_open_ctx(g, &ctx)) return fail_all(rank, "starting", MODATTN_EINVAL);
    int st = cli_load_model(g, ctx, model_dir, &model);
    if (st) return fail_all(rank, "loading the model", st);
    modattn_index_options o;
    memset(&o, 0, sizeof o);
    o.chunk_tokens = (size_t)a.chunk_tokens;
    o.overlap = (long)a.overlap;
    o.max_file_bytes = (uint64_t)a.max_size;
    o.file_timeout_s = a.file_timeout_s > 0 ? a.file_timeout_s : -1; /* 0 on the command line: no limit */
    o.batch_chunks = (size_t)a.batch;
    o.prune = a.prune;
    o.ann_exec = modattn_ctx_exec(ctx); /* rank 0 keeps the ANN index up to date, as a plain run */
    modattn_index_stats s;
    uint64_t t0 = modattn_now_ns();

    /* 1-2. rank 0 plans and splits; every rank learns its share */
    if (rank == 0) {
        if ((st = modattn_store_open(a.db, MODATTN_STORE_CREATE, &store))) return fail_all(rank, "opening the store", st);
        if (modattn_store_note(store)) {
            char nb[1024];
            fprintf(stderr, "modattn: note: %s\n", cli_term_text(modattn_store_note(store), nb, sizeof nb));
        }
        modattn_store_set_wait(store, a.wait_s, NULL, NULL);
        modattn_index_split plan = {.plan = plan_add, .ud = &m};
        if ((st = modattn_index_paths_split(store, model, a.paths, a.npaths, &o, &plan, &s)))
            return fail_all(rank, "planning", st);
        assign(&m);
    }
    if ((st = share_plan(&m))) return fail_all(rank, "sharing the plan", st);

    if (rank != 0) {
        /* 3. a worker: embed this rank's share, send each document to rank 0 */
        const char **mine = calloc(m.nplan + 1, sizeof *mine);
        size_t nmine = 0;
        if (!mine) return fail_all(rank, "the plan", MODATTN_ENOMEM);
        for (size_t i = 0; i < m.nplan; i++)
            if (m.owner[i] == rank) mine[nmine++] = m.plan[i];
        modattn_index_split emb = {.emit = emit, .ud = &m};
        if (nmine && (st = modattn_index_paths_split(NULL, model, mine, nmine, &o, &emb, &s)))
            return fail_all(rank, "embedding", st);
        free(mine);
        int end = 0;
        MPI_Send(&end, 1, MPI_INT, 0, TAG_END, MPI_COMM_WORLD);
        reap(&m, true);
        if (modattn__env_bool("MODATTN_MPI_VERBOSE", false))
            fprintf(stderr, "modattn: index --mpi (rank %d): embedded %llu documents (%llu chunks) in %.2f s\n", rank,
                    (unsigned long long)m.emitted, (unsigned long long)s.chunks_embedded,
                    (double)(modattn_now_ns() - t0) * 1e-9);
        free_mpi_index(&m);
        modattn_model_free(model);
        free(a.paths);
        free(av);
        MPI_Finalize();
        return 0;
    }

    /* 4. rank 0: the plain run, other ranks' vectors taken in their turn */
    signal(SIGTERM, on_term); /* mpirun ends us when another rank dies: say what that means */
    m.ended = calloc((size_t)size, sizeof *m.ended);
    m.by_path = calloc(m.nplan + 1, sizeof *m.by_path);
    if (!m.ended || !m.by_path) return fail_all(rank, "the plan", MODATTN_ENOMEM);
    for (size_t i = 0; i < m.nplan; i++) m.by_path[i] = i;
    g_sort_m = &m;
    qsort(m.by_path, m.nplan, sizeof *m.by_path, cmp_plan_path);
    cli_index_ui ui = {.json = a.json, .quiet = a.quiet, .errors = json_array(), .skipped = json_array()};
    o.on_event = cli_index_on_event;
    o.ud = &ui;
    if (!a.quiet) modattn_store_set_wait(store, a.wait_s, NULL, NULL);
    modattn_index_split wr = {.remote = is_remote, .fetch = fetch, .ud = &m};
    st = modattn_index_paths_split(store, model, a.paths, a.npaths, &o, &wr, &s);
    if (st) return fail_all(rank, "index", st);
    /* the ends of every rank (and anything sent that was not taken), so that their sends complete */
    while (m.nended < size - 1)
        if ((st = receive_some(&m, true))) return fail_all(rank, "receiving", st);
    double secs = (double)(modattn_now_ns() - t0) * 1e-9;
    rc = 0;
    if (!ui.errors || !ui.skipped || ui.oom) {
        fprintf(stderr, "modattn: index: out of memory\n");
        rc = 1;
    } else {
        print_summary(&a, &ui, &s, secs, size, &rc);
        if (modattn__env_bool("MODATTN_MPI_VERBOSE", false))
            fprintf(stderr, "modattn: index --mpi (rank 0): %zu documents planned (%llu bytes), %llu taken from "
                            "other ranks, %llu embedded here after all\n", m.nplan,
                    (unsigned long long)m.planned_bytes, (unsigned long long)m.fetched,
                    (unsigned long long)m.refetched);
        if (cli_stdout_check()) rc = 1;
        else if (s.errors) rc = 3;
    }
    signal(SIGTERM, SIG_DFL);
    json_decref(ui.errors);
    json_decref(ui.skipped);
    free_mpi_index(&m);
    modattn_store_close(store);
    modattn_model_free(model);
    free(a.paths);
    free(av);
    MPI_Finalize();
    return rc;
}

#endif
