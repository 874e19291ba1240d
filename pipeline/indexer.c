/* pipeline/indexer.c — `modattn index`: walk the paths, decide per file (unchanged, skipped,
 * (re)indexed), extract and chunk the text, embed the chunks in batches that span documents, and
 * write every document in its own transaction.
 *
 * Flow. The walk lists regular files first (so the progress line knows the total). Each file is
 * then looked up in the store: same size and mtime (and chunking) means unchanged without reading
 * it; otherwise it is read (at most max_file_bytes, checked before reading), hashed with XXH3, and
 * compared by content. New or changed documents join a queue of chunks; whenever the queue holds
 * a batch, the batch is embedded (batches span documents) on a thread of its own, while this one
 * goes on: it writes the documents the batch before completed, then reads, extracts, chunks and
 * hashes the next files until the next batch is full, and waits for the running one only then
 * (two batches: one embedding, one filling; the read-ahead is one batch of chunks and the file
 * that completes it, counted against the memory budget like the rest of the queue). Only that
 * thread calls the model; the store, events, progress and opt->cancel stay on this one. So the
 * batches, the order of writes and every vector are those of a run that waited for each batch
 * (tests/pipeline/test_index_overlap.c); with a memory budget set the run does wait (takes turns),
 * so that what the budget refuses does not depend on timing. A document's vectors are kept until
 * its last chunk is embedded; then the document, its chunks and their vectors are written in one
 * short transaction. So no write transaction waits for the model (another writer waits
 * milliseconds, not minutes), and a kill leaves every document complete or absent.
 * The price is a document's vectors in memory until it is written: dim x 4 bytes per chunk,
 * about 100 MB for a 64 MiB text file of MiniLM chunks. A document whose file became binary,
 * empty or too large has its old entries removed.
 *
 * HTML and PDF text is extracted in a child process under a memory and a time limit
 * (pipeline/extract.c): a file past either is an error event, and the run goes on. A hard link
 * to a stored file (the same device and inode, the same content) is that document, as a symbolic
 * link is. opt->cancel is asked between files, between slices of a batch and while a child
 * extracts: a stop keeps what was committed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/search.h"
#include "modattn/sparse.h"
#include "modattn/store.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "pipeline/fmt_internal.h"
#include "pipeline/indexer_stages.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/store_notes.h"

#define DEFAULT_BATCH_CHUNKS 64
#define CANCEL_SLICE 8 /* chunks per model call when a cancel hook is set */
/* HTML files up to this size are extracted in this process: a child costs a fork (a few ms, ten
 * times a small page's extraction), and libxml2's worst case on 16 KiB (quadratic markup: 1,500
 * attributes on one element) is some 30 ms and a few MB. PDFs always go to a child: a few KB of
 * FlateDecode can expand a thousandfold. */
#define SMALL_HTML_BYTES 16384
/* An archive walked as a folder (a.zip!/inner/file.txt): at most this many members are read, and
 * at most ARCHIVE_TOTAL_FACTOR x --max-file-size bytes in all (each member at most --max-file-size);
 * past either the rest is not read (an error for the archive). */
#define ARCHIVE_MAX_MEMBERS 10000
#define ARCHIVE_TOTAL_FACTOR 4

/* ------------------------------------------------------------------ paths */

char *modattn__path_absolute(const char *path) {
    if (!path) return NULL;
    char cwd[4096] = "";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) {
        modattn__error(MODATTN_EIO, "cannot read the current directory: %s", strerror(errno));
        return NULL;
    }
    size_t cap = strlen(cwd) + strlen(path) + 3;
    char *in = modattn__malloc(cap, MODATTN_MEM_OTHER);
    char *out = modattn__malloc(cap, MODATTN_MEM_OTHER);
    if (!in || !out) {
        modattn_free(in);
        modattn_free(out);
        return NULL;
    }
    snprintf(in, cap, "%s/%s", cwd, path);
    /* lexical normalisation: drop "" and ".", ".." removes the previous component */
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/') p++;
        if (!*p) break;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 1 && p[0] == '.') {
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
        } else {
            out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    if (o == 0) out[o++] = '/';
    out[o] = '\0';
    modattn_free(in);
    return out;
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = modattn__malloc(a + b + 2, MODATTN_MEM_OTHER);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t o = a;
    if (o == 0 || p[o - 1] != '/') p[o++] = '/';
    memcpy(p + o, name, b + 1);
    return p;
}

/* ------------------------------------------------------------------ the run */

typedef struct file_entry {
    char *path;
    uint64_t size;
    dev_t dev; /* one file, one document: the same (dev, ino) reached by two names is one */
    ino_t ino;
} file_entry;

typedef struct dir_id {
    dev_t dev;
    ino_t ino;
    const char *path;
} dir_id;

/* a document waiting for (the rest of) its embeddings */
typedef struct pdoc {
    char *path;
    uint64_t hash;
    int64_t mtime_ns, size;
    modattn_doc_kind kind;
    modattn_doc_text text;
    modattn_chunk *chunks;
    size_t nchunks;
    size_t queued;   /* chunks handed to a batch */
    size_t embedded; /* chunks whose vector is in vecs */
    float *vecs;     /* [nchunks, dim] normalised vectors, until the document is written */
    int32_t *ntok;   /* [nchunks] word pieces fed to the model, specials included */
    modattn_sparse_vec *sp; /* [nchunks] sparse vectors (index --sparse; NULL without), until written */
    int64_t doc_id;
    bool remote;     /* another process embeds it (its vectors are fetched: stages->fetch) */
    bool member;     /* a member of an archive (counted for progress with its archive) */
    bool drop_note;  /* the store has a note for its path (a file skipped before): dropped with it */
    /* an archive's note (no chunks): written after its members, in queue order, with the members
     * the store has under it and this run did not meet removed */
    bool archive_note;
    bool container_doc;  /* ... of a container that is a document itself (an e-mail): no note */
    bool archive_failed; /* the archive could not be read whole: no note, nothing removed */
    bool member_errors;  /* some members were not read: no note (the next run reads it again) */
    char **seen;         /* the member paths met (sorted when written) */
    size_t nseen, cseen;
    /* incremental line counting for text files */
    size_t line_off;
    int64_t line_no;
    struct pdoc *next;
} pdoc;

/* A batch of chunks for the model (across documents): their texts, and where each vector goes. */
typedef struct batch {
    const char **texts;
    size_t *lens;
    char **clean; /* copies of chunks whose UTF-8 was repaired (owned) */
    pdoc **doc;
    size_t *idx;
    float *vec;   /* [n, dim] as the model gives them */
    int32_t *ntok;
    modattn_sparse_vec *sp; /* [n] their sparse vectors (index --sparse; NULL without) */
    size_t n;
} batch;

/* The embedder: one batch at a time on a thread of its own, while the run's thread reads,
 * extracts, chunks and hashes the next files and writes the documents the batch before completed.
 * Only this thread calls the model; everything else (the store, events, progress, opt->cancel,
 * the queue) stays on the run's thread. */
typedef struct embedder {
    pthread_t th;
    bool running;  /* a batch handed over and not yet taken back */
    bool threaded; /* ... on th (false: pthread_create failed, it ran in the caller's thread) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;          /* under mu */
    atomic_bool abort;  /* the run stops: no more slices */
    /* the job, set before the thread starts and read back after done */
    batch *b;
    modattn_model *model;
    const modattn_embed_options *eo;
    modattn_sparse_encoder *sparse; /* also the sparse vectors (NULL: none) */
    const modattn_sparse_options *spo;
    size_t dim, step;
    int st;
    size_t failed_at;   /* the slice that failed */
    bool aborted;       /* stopped before its last slice: nothing of the batch is used */
    char msg[512];      /* the model's message (errors are per thread) */
} embedder;

typedef struct run {
    modattn_store *store;
    modattn_model *model;
    const modattn_tokenizer *tok; /* the model's (borrowed) */
    const modattn_index_options *opt;
    modattn_index_stats *stats;
    const modattn__index_stages *stages; /* the stages a caller replaced (NULL: a plain run) */
    size_t dim, window, overlap, batch;
    int32_t chunk_tokens;
    modattn_embed_options eo; /* the prompt and dimensions chunks are embedded with */
    uint64_t max_bytes;
    char *own[5];              /* the store's own files, by path (owned) ... */
    const char *skip_paths[5]; /* ... as the walk skips them ... */
    bool have_store_dir;       /* ... and by name in the store's folder, however it is reached */
    dev_t store_dev;
    ino_t store_ino;
    const char *store_base;
    /* walk */
    file_entry *files;
    size_t nfiles, fcap;
    dir_id *dirs;
    size_t ndirs, dcap;
    /* queue */
    pdoc *head, *tail;
    size_t unqueued; /* chunks in the queue not yet in a batch */
    /* batches: one filled here while the other embeds (bt[fill] is the one to fill) */
    batch bt[2];
    int fill;
    embedder emb;
    bool emb_sync;    /* take turns: wait for each batch before reading on (a memory budget is set) */
    /* progress */
    uint64_t bytes_total, bytes_done, files_done;
    uint64_t t0_ns, last_progress_ns;
    /* HTML and PDF extraction: its limits (pipeline/extract.c) */
    modattn__extract_limits xlim;
    bool stop;  /* opt->cancel said so */
    bool bound; /* run_setup got past binding the store to the model: run_free has work */
} run;

/* Whether the caller asked to stop (opt->cancel); once it has, the answer stays yes. */
static bool cancelled(run *r) {
    if (!r->stop && r->opt->cancel && r->opt->cancel(r->opt->ud)) r->stop = true;
    return r->stop;
}
static int extract_cancel(void *ud) { return cancelled(ud); }

static void event(run *r, modattn_index_event ev, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event(run *r, modattn_index_event ev, const char *path, const char *fmt, ...) {
    if (ev == MODATTN_INDEX_ERROR) r->stats->errors++;
    if (!r->opt->on_event) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->opt->on_event(r->opt->ud, ev, path, msg);
}

static void progress(run *r, bool force) {
    if (!r->opt->on_progress) return;
    uint64_t now = modattn__now_ns();
    if (!force && now - r->last_progress_ns < 200000000ull) return;
    r->last_progress_ns = now;
    modattn_index_progress p;
    p.files_done = r->files_done;
    p.files_total = r->nfiles;
    /* documents in the queue count by the share of their chunks written */
    uint64_t partial = 0;
    for (pdoc *d = r->head; d; d = d->next)
        if (d->nchunks) partial += (uint64_t)d->size * d->embedded / d->nchunks;
    p.bytes_done = r->bytes_done + partial;
    p.bytes_total = r->bytes_total;
    p.chunks = r->stats->chunks_embedded;
    p.tokens = r->stats->tokens_embedded;
    p.elapsed_s = (double)(now - r->t0_ns) * 1e-9;
    r->opt->on_progress(r->opt->ud, &p);
}

/* A file's outcome is final: count it for the progress line. */
static void file_done(run *r, uint64_t size) {
    r->files_done++;
    r->bytes_done += size;
    progress(r, false);
}

/* ---- walk */

static int add_file(run *r, const char *path, const struct stat *sb) {
    uint64_t size = (uint64_t)sb->st_size;
    if (r->nfiles == r->fcap) {
        size_t nc = r->fcap ? r->fcap * 2 : 64;
        file_entry *n = modattn__realloc(r->files, nc * sizeof *n, MODATTN_MEM_OTHER);
        if (!n) return modattn__mem_last_status();
        r->files = n;
        r->fcap = nc;
    }
    char *p = modattn__strdup(path, MODATTN_MEM_OTHER);
    if (!p) return modattn__mem_last_status();
    r->files[r->nfiles++] = (file_entry){p, size, sb->st_dev, sb->st_ino};
    r->bytes_total += size;
    return 0;
}

/* Something the walk met that is not indexed: counted as a seen, skipped file. */
static void walk_skip(run *r, modattn_index_event ev, const char *path, const char *why) {
    r->stats->files_seen++;
    r->stats->files_skipped++;
    event(r, ev, path, "%s", why);
}

static int walk(run *r, const char *path, bool top);

/* name is base, or base followed by SQLite's "-wal", "-shm" or "-journal" */
static bool is_store_file(const char *base, const char *name) {
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0) return false;
    const char *rest = name + n;
    return !*rest || !strcmp(rest, "-wal") || !strcmp(rest, "-shm") || !strcmp(rest, "-journal") ||
           !strcmp(rest, ".vec") || !strncmp(rest, ".vec.tmp.", 9);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk_dir(run *r, const char *path, const struct stat *sb) {
    for (size_t i = 0; i < r->ndirs; i++) {
        if (r->dirs[i].dev == sb->st_dev && r->dirs[i].ino == sb->st_ino) {
            char why[600];
            snprintf(why, sizeof why, "symbolic link loop: leads back to %s", r->dirs[i].path);
            walk_skip(r, MODATTN_INDEX_ERROR, path, why);
            return 0;
        }
    }
    DIR *d = opendir(path);
    if (!d) {
        char why[300];
        snprintf(why, sizeof why, "cannot open the folder: %s", strerror(errno));
        walk_skip(r, MODATTN_INDEX_ERROR, path, why);
        return 0;
    }
    /* names, sorted: the walk's order does not depend on the file system */
    char **names = NULL;
    size_t n = 0, cap = 0;
    int st = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        /* hidden entries (".git", ".cache", ...) are not walked into; name them to index them */
        if (e->d_name[0] == '.') continue;
        if (r->have_store_dir && sb->st_dev == r->store_dev && sb->st_ino == r->store_ino &&
            is_store_file(r->store_base, e->d_name))
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            char **nn = modattn__realloc(names, nc * sizeof *nn, MODATTN_MEM_OTHER);
            if (!nn) {
                st = modattn__mem_last_status();
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = modattn__strdup(e->d_name, MODATTN_MEM_OTHER))) {
            st = modattn__mem_last_status();
            break;
        }
        n++;
    }
    closedir(d);
    if (!st) {
        if (n > 1) qsort(names, n, sizeof *names, cmp_str);
        if (r->ndirs == r->dcap) {
            size_t nc = r->dcap ? r->dcap * 2 : 16;
            dir_id *nd = modattn__realloc(r->dirs, nc * sizeof *nd, MODATTN_MEM_OTHER);
            if (!nd) st = modattn__mem_last_status();
            else {
                r->dirs = nd;
                r->dcap = nc;
            }
        }
    }
    if (!st) {
        r->dirs[r->ndirs++] = (dir_id){sb->st_dev, sb->st_ino, path};
        for (size_t i = 0; i < n && !st; i++) {
            char *child = path_join(path, names[i]);
            if (!child) {
                st = modattn__mem_last_status();
                break;
            }
            st = walk(r, child, false);
            modattn_free(child);
        }
        r->ndirs--;
    }
    for (size_t i = 0; i < n; i++) modattn_free(names[i]);
    modattn_free(names);
    return st;
}

static const char *type_name(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

static int walk(run *r, const char *path, bool top) {
    for (size_t i = 0; i < sizeof r->skip_paths / sizeof *r->skip_paths; i++)
        if (r->skip_paths[i] && strcmp(path, r->skip_paths[i]) == 0) return 0;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int err = errno;
        struct stat lb;
        char why[300];
        if (err == ELOOP)
            snprintf(why, sizeof why, "symbolic link loop (%s)", strerror(err));
        else if (err == ENOENT && lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode))
            snprintf(why, sizeof why, "dangling symbolic link");
        else
            snprintf(why, sizeof why, "%s%s", top ? "" : "cannot read: ", strerror(err));
        walk_skip(r, MODATTN_INDEX_ERROR, path, why);
        return 0;
    }
    if (S_ISDIR(sb.st_mode)) return walk_dir(r, path, &sb);
    if (!S_ISREG(sb.st_mode)) {
        char why[64];
        snprintf(why, sizeof why, "%s", type_name(sb.st_mode));
        walk_skip(r, MODATTN_INDEX_SKIPPED, path, why);
        return 0;
    }
    return add_file(r, path, &sb);
}

static int cmp_files(const void *a, const void *b) {
    return strcmp(((const file_entry *)a)->path, ((const file_entry *)b)->path);
}

static int cmp_file_ids(const void *a, const void *b) {
    const file_entry *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* true if path names the file without a symbolic link on the way (its canonical name) */
static bool is_canonical(const char *path) {
    char *c = realpath(path, NULL);
    bool same = c && strcmp(c, path) == 0;
    free(c);
    return same;
}

/* The id of the document stored under path, or -1 (none, or no store). */
static int64_t stored_id_of(run *r, const char *path) {
    modattn_store_doc d;
    if (!r->store || modattn__store_find_document(r->store, path, &d) != 1) return -1;
    return d.id;
}

/* One file, one document: names of the same file (dev, ino) found by the walk, through links or
 * hard links or named twice, keep one: the name the store has it under if the walk met it (the
 * first stored, if an older version stored it under several), else its canonical name if the walk
 * met it, else the first in path order (so a later run that reaches it the same way picks the same
 * name). The others are reported, counted as skipped. Leaves the list in path order. */

static void dedupe_files(run *r) {
    if (r->nfiles < 2) return;
    qsort(r->files, r->nfiles, sizeof *r->files, cmp_file_ids);
    size_t u = 0;
    for (size_t i = 0; i < r->nfiles;) {
        size_t j = i + 1;
        while (j < r->nfiles && r->files[j].dev == r->files[i].dev && r->files[j].ino == r->files[i].ino) j++;
        size_t keep = i;
        if (j - i > 1) {
            /* the name the store has it under (a hard link added since is not a new document;
             * stored under several names by an older version: the first stored), else the
             * canonical one */
            bool found = false;
            int64_t best = -1;
            for (size_t k = i; k < j; k++) {
                int64_t id = stored_id_of(r, r->files[k].path);
                if (id >= 0 && (best < 0 || id < best)) {
                    best = id;
                    keep = k;
                    found = true;
                }
            }
            for (size_t k = i; k < j && !found; k++)
                if (is_canonical(r->files[k].path)) {
                    keep = k;
                    break;
                }
            for (size_t k = i; k < j; k++) {
                if (k == keep) continue;
                r->bytes_total -= r->files[k].size;
                if (strcmp(r->files[k].path, r->files[keep].path) != 0) {
                    char why[600];
                    snprintf(why, sizeof why, "the same file as %s: indexed once, under that name",
                             r->files[keep].path);
                    walk_skip(r, MODATTN_INDEX_SKIPPED, r->files[k].path, why);
                }
                modattn_free(r->files[k].path);
            }
        }
        r->files[u++] = r->files[keep];
        i = j;
    }
    r->nfiles = u;
    qsort(r->files, r->nfiles, sizeof *r->files, cmp_files);
}

/* ---- per file */

static void pdoc_free(pdoc *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nseen; i++) modattn_free(d->seen[i]);
    modattn_free(d->seen);
    modattn_free(d->path);
    modattn_doc_text_clear(&d->text);
    modattn_free(d->chunks);
    if (d->sp) modattn_sparse_vec_free(d->sp, d->nchunks);
    modattn_free(d->sp);
    modattn_free(d->vecs);
    modattn_free(d->ntok);
    modattn_free(d);
}

/* Reads the whole file (size known to be <= the cap). *err gets errno on failure. */
static char *read_fd(int fd, size_t size, size_t *got, int *err) {
    char *buf = modattn__malloc(size + 1, MODATTN_MEM_OTHER);
    if (!buf) {
        *err = ENOMEM;
        return NULL;
    }
    size_t o = 0;
    while (o < size) {
        ssize_t k = read(fd, buf + o, size - o);
        if (k < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            modattn_free(buf);
            return NULL;
        }
        if (k == 0) break; /* shrank meanwhile: what we read is the document */
        o += (size_t)k;
    }
    buf[o] = '\0';
    *got = o;
    return buf;
}

static int64_t chunk_line(pdoc *d, size_t offset) {
    if (d->kind == MODATTN_DOC_PDF) return 0;
    if (d->text.marks) return modattn_doc_text_locate(&d->text, offset);
    /* text file: count newlines from the previous chunk's start on (chunks come in order) */
    if (offset < d->line_off) {
        d->line_off = 0;
        d->line_no = 1;
    }
    const char *p = d->text.text + d->line_off, *end = d->text.text + offset;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        d->line_no++;
        p++;
    }
    d->line_off = offset;
    return d->line_no;
}

/* finding a stored name of the file (dev, ino) among documents of the same content */
typedef struct same_file {
    dev_t dev;
    ino_t ino;
    char *path; /* found: modattn__strdup'd */
    int st;
} same_file;

static int find_same_file(void *ud, const char *path) {
    same_file *sf = ud;
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_dev != sf->dev || sb.st_ino != sf->ino) return 0;
    if (!(sf->path = modattn__strdup(path, MODATTN_MEM_OTHER))) return sf->st = modattn__mem_last_status();
    return 1;
}

static int flush_batch(run *r);
static int write_ready(run *r, bool wait);

/* ---- per file, in stages: classify (what the store has, what stat says, what the content says)
 * -> load the document (its kind, its text) -> chunk -> embed (the queue, in batches across
 * documents) -> sink (write_doc: the store, or the caller's sink). Each stage either leaves the
 * file to the next or settles it (skipped, unchanged, an error: said and counted); the driver
 * (index_file) then applies what settling it means for the store (its old entries removed, its
 * stored mtime brought up to date), so that a plan (plan_file) can run the same classification
 * and change nothing. */

typedef struct file_ctx {
    int fd;
    struct stat sb;
    int had;                  /* the store has a document under f->path (1) or not (0) */
    modattn_store_doc old;    /* ... that one */
    bool same_chunking;       /* ... chunked as this run chunks */
    int64_t mtime, size;      /* by fstat */
    char *buf;                /* the file's bytes (then the UTF-8 of UTF-16 text), until the text owns them */
    size_t len, file_len;     /* bytes in buf; bytes read from the file */
    uint64_t hash;            /* XXH3 of the file's bytes */
    pdoc *d;                  /* the document, until the queue owns it */
    bool settled;             /* the file's outcome is decided and said */
    bool drop;                /* ... and what the store had for it goes */
    bool touch;               /* ... unchanged by content: its stored mtime and size updated */
    bool stopped;             /* the caller asked to stop while its text was extracted: not counted */
    bool member;              /* a member of an archive (its bytes in buf from the start) */
    int noted;                /* the store has a note for the path (1, in note) or not (0) */
    modattn__note note;
    const char *skip_reason;  /* skipped for its format: the note to keep (top-level files only) */
} file_ctx;

/* A file's outcome, counted as skipped and said (ev: skipped by policy or an error). */
static void settle_skip(run *r, file_ctx *c, const char *path, modattn_index_event ev, bool drop, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void settle_skip(run *r, file_ctx *c, const char *path, modattn_index_event ev, bool drop, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->stats->files_skipped++;
    event(r, ev, path, "%s", msg);
    c->settled = true;
    c->drop = drop && c->had == 1;
}

/* classify, 1: the document the store has for this file (none with no store: every file given is
 * embedded). Reached through a link this time, stored under its own name by an earlier run: it is
 * that document (f->path becomes that name). */
static int find_stored(run *r, file_entry *f, file_ctx *c) {
    memset(c, 0, sizeof *c);
    c->fd = -1;
    r->stats->files_seen++;
    if (!r->store) return 0;
    if ((c->had = modattn__store_find_document(r->store, f->path, &c->old)) != 0) return c->had < 0 ? c->had : 0;
    char *canon = realpath(f->path, NULL);
    int st = 0;
    if (canon && strcmp(canon, f->path) != 0) {
        int k = modattn__store_find_document(r->store, canon, &c->old);
        char *p = k == 1 ? modattn__strdup(canon, MODATTN_MEM_OTHER) : NULL;
        if (k < 0) st = k;
        else if (k == 1 && !p) st = modattn__mem_last_status();
        else if (p) {
            modattn_free(f->path);
            f->path = p;
            c->had = 1;
        }
    }
    free(canon);
    return st;
}

/* classify, 2: by what fstat says: not a regular file, empty, over the size cap, or unchanged by
 * size and mtime. */
static int classify_stat(run *r, file_entry *f, file_ctx *c) {
    c->fd = open(f->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (c->fd < 0 || fstat(c->fd, &c->sb) != 0) {
        settle_skip(r, c, f->path, MODATTN_INDEX_ERROR, false, "cannot read: %s", strerror(errno));
        return 0;
    }
    if (!S_ISREG(c->sb.st_mode)) {
        settle_skip(r, c, f->path, MODATTN_INDEX_SKIPPED, false, "%s", type_name(c->sb.st_mode));
        return 0;
    }
    c->mtime = (int64_t)c->sb.st_mtim.tv_sec * 1000000000 + c->sb.st_mtim.tv_nsec;
    c->size = (int64_t)c->sb.st_size;
    c->same_chunking = c->had == 1 && c->old.chunk_tokens == r->chunk_tokens && c->old.overlap == (int32_t)r->overlap;
    const char *removed = c->had == 1 ? " (its old entries removed)" : "";
    if (c->size == 0) {
        settle_skip(r, c, f->path, MODATTN_INDEX_SKIPPED, true, "empty file%s", removed);
    } else if ((uint64_t)c->size > r->max_bytes) {
        settle_skip(r, c, f->path, MODATTN_INDEX_SKIPPED, true,
                    "%lld bytes, over the size cap of %llu bytes (--max-file-size)%s", (long long)c->size,
                    (unsigned long long)r->max_bytes, removed);
    } else if (c->same_chunking && c->old.size == c->size && c->old.mtime_ns == c->mtime) {
        r->stats->files_unchanged++;
        c->settled = true;
    } else if (c->had == 0 && r->store) {
        int k = c->noted = modattn__note_get(r->store, f->path, &c->note);
        if (k < 0) return k;
        if (k == 1 && c->note.size == c->size && c->note.mtime_ns == c->mtime) {
            char chunking[64];
            snprintf(chunking, sizeof chunking, "chunks of %d, overlap %zu", r->chunk_tokens, r->overlap);
            if (strcmp(c->note.what, "archive") == 0 && strcmp(c->note.reason, chunking) == 0) {
                r->stats->files_unchanged++; /* read whole before, unchanged since: its members too */
                c->settled = true;
            } else if (strcmp(c->note.what, "skipped") == 0) {
                /* said when it was skipped; said again only to whoever asks (--verbose) */
                settle_skip(r, c, f->path, MODATTN_INDEX_SKIPPED, false, "%s" MODATTN__AS_BEFORE, c->note.reason);
            }
        }
    }
    return 0;
}

/* The file's bytes (the size cap checked: at most max_bytes) and their hash. */
static int read_content(run *r, file_entry *f, file_ctx *c) {
    int err = 0;
    if (!(c->buf = read_fd(c->fd, (size_t)c->size, &c->len, &err))) {
        if (err == ENOMEM) return modattn__mem_last_status();
        settle_skip(r, c, f->path, MODATTN_INDEX_ERROR, false, "cannot read: %s", strerror(err));
        return 0;
    }
    r->stats->bytes_read += c->len;
    c->file_len = c->len; /* what was read; the text may be longer once decoded */
    c->hash = XXH3_64bits(c->buf, c->len);
    return 0;
}

/* classify, 3: by content. A hard link to a file stored under another name (the same device and
 * inode, the same content) is that document, as a symbolic link is; then the same chunking and
 * the same hash: unchanged (its stored mtime and size brought up to date). */
static int classify_content(run *r, file_entry *f, file_ctx *c) {
    if (c->had == 0 && r->store && c->sb.st_nlink > 1) {
        same_file sf = {c->sb.st_dev, c->sb.st_ino, NULL, 0};
        int k = modattn__store_paths_with_hash(r->store, c->hash, (int64_t)c->len, find_same_file, &sf);
        if (sf.st) return sf.st;
        if (k < 0) return k;
        if (sf.path) {
            int f2 = modattn__store_find_document(r->store, sf.path, &c->old);
            if (f2 != 1) {
                modattn_free(sf.path);
                if (f2 < 0) return f2;
            } else {
                modattn_free(f->path);
                f->path = sf.path;
                c->had = 1;
                c->same_chunking = c->old.chunk_tokens == r->chunk_tokens && c->old.overlap == (int32_t)r->overlap;
            }
        }
    }
    if (c->same_chunking && c->old.hash == c->hash) {
        r->stats->files_unchanged++;
        c->settled = true;
        c->touch = c->old.mtime_ns != c->mtime || c->old.size != (int64_t)c->len;
    }
    return 0;
}

/* The memory an extraction child may use (its RLIMIT_DATA beyond what it inherits): what the memory
 * budget leaves now, else MODATTN_INGEST_DEFAULT_EXTRACT_MEM. */
static void extract_mem(run *r) {
    if (r->opt->extract_mem_bytes) {
        r->xlim.mem_bytes = r->opt->extract_mem_bytes;
    } else {
        modattn_mem_stats ms;
        modattn_mem_get_stats(&ms);
        r->xlim.mem_bytes = ms.budget <= 0                 ? MODATTN_INGEST_DEFAULT_EXTRACT_MEM
                            : ms.budget > ms.current_total ? (uint64_t)(ms.budget - ms.current_total)
                                                           : 1;
    }
}

/* load the document: its kind (binary: skipped), and its text: the file's bytes (UTF-16 decoded),
 * or what an HTML, PDF, office, EPUB, RTF, e-mail or compressed file holds, extracted in a child
 * process under the memory and time limits (pipeline/extract.c, pipeline/fmt_*.c). */
static int load_document(run *r, file_entry *f, file_ctx *c) {
    modattn_doc_kind kind = modattn_sniff_kind(f->path, (const unsigned char *)c->buf, c->len);
    if (kind == MODATTN_DOC_BINARY) {
        /* "binary file", or which format it is and that it is not read ("a PNG image (unsupported
         * format)"); the store remembers it (a file of its own: an archive's member goes with its
         * archive) */
        const char *why = modattn__sniff_unsupported(f->path, (const unsigned char *)c->buf, c->len);
        settle_skip(r, c, f->path, MODATTN_INDEX_SKIPPED, true, "%s%s", why,
                    c->had == 1 ? " (its old entries removed)" : "");
        if (!c->member) c->skip_reason = why;
        return 0;
    }
    if (modattn__utf16_bom(c->buf, c->len)) {
        /* UTF-16 text: indexed as its UTF-8 decoding (byte ranges then point into that) */
        size_t n = 0;
        char *u8 = modattn__utf16_to_utf8(c->buf, c->len, &n);
        if (!u8) return modattn__mem_last_status();
        modattn_free(c->buf);
        c->buf = u8;
        c->len = n;
    }
    pdoc *d = c->d = modattn__calloc(1, sizeof *d, MODATTN_MEM_OTHER);
    if (!d || !(d->path = modattn__strdup(f->path, MODATTN_MEM_OTHER))) return modattn__mem_last_status();
    d->hash = c->hash;
    d->mtime_ns = c->mtime;
    d->size = (int64_t)c->file_len;
    d->kind = kind;
    d->line_no = 1;
    d->member = c->member;
    d->drop_note = c->noted == 1;
    if (!modattn__kind_extracted(kind)) {
        d->text.text = c->buf; /* the file's bytes are the text: ranges point into the file */
        d->text.len = c->len;
        c->buf = NULL;
        return 0;
    }
    extract_mem(r);
    int st;
    if (kind == MODATTN_DOC_HTML && c->len <= SMALL_HTML_BYTES) /* see SMALL_HTML_BYTES */
        st = modattn_extract_html(c->buf, c->len, &d->text);
    else
        st = modattn__extract_isolated(kind, c->buf, c->len, &r->xlim, &d->text, &c->stopped);
    if (kind != MODATTN_DOC_EMAIL && kind != MODATTN_DOC_MBOX) { /* mail: kept for its attachments */
        modattn_free(c->buf);
        c->buf = NULL;
    }
    if (c->stopped) { /* the caller asked to stop: this file is not done, nor counted */
        r->stats->files_seen--;
        return 0;
    }
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) return st;
    if (st) settle_skip(r, c, f->path, MODATTN_INDEX_ERROR, true, "cannot extract its text: %s", modattn_last_error());
    return 0;
}

/* chunk: the text in windows of word pieces (no text: skipped), and room for their vectors. */
static int chunk_document(run *r, file_entry *f, file_ctx *c) {
    pdoc *d = c->d;
    /* a UTF-8 byte order mark is not text */
    size_t from = !modattn__kind_extracted(d->kind) && d->text.len >= 3 &&
                          memcmp(d->text.text, "\xef\xbb\xbf", 3) == 0
                      ? 3
                      : 0;
    int st = modattn_chunk_text(r->tok, d->text.text + from, d->text.len - from, r->window, r->overlap, &d->chunks,
                                &d->nchunks);
    if (st) return st;
    for (size_t i = 0; i < d->nchunks; i++) {
        d->chunks[i].start += from;
        d->chunks[i].end += from;
    }
    if (d->nchunks == 0) {
        settle_skip(r, c, f->path, MODATTN_INDEX_SKIPPED, true, "no text to index%s",
                    c->had == 1 ? " (its old entries removed)" : "");
        return 0;
    }
    d->vecs = modattn__malloc(d->nchunks * r->dim * sizeof(float), MODATTN_MEM_INDEX);
    d->ntok = modattn__malloc(d->nchunks * sizeof(int32_t), MODATTN_MEM_OTHER);
    if (r->opt->sparse && !(d->sp = modattn__calloc(d->nchunks, sizeof *d->sp, MODATTN_MEM_OTHER)))
        return modattn__mem_last_status();
    return d->vecs && d->ntok ? 0 : modattn__mem_last_status();
}

/* embed: who embeds the document: this run (its chunks join the next batches), or, when the
 * caller's stages say another process does, nobody here (its vectors are fetched in its turn) ... */
static int route_document(run *r, file_ctx *c) {
    if (!r->stages || !r->stages->remote) return 0;
    int rem = r->stages->remote(r->stages->ud, c->d->path);
    if (rem < 0) return rem;
    c->d->remote = rem == 1;
    if (c->d->remote) c->d->queued = c->d->nchunks;
    return 0;
}

/* ... then it joins the queue; full batches are embedded, and the documents they complete go to
 * the sink (flush_batch, write_ready). The queue owns it now: it is counted when it is written. */
static int embed_document(run *r, file_ctx *c) {
    pdoc *d = c->d;
    if (r->tail) r->tail->next = d;
    else r->head = d;
    r->tail = d;
    if (!d->remote) r->unqueued += d->nchunks;
    c->d = NULL;
    modattn_free(c->buf); /* an e-mail's bytes, kept for its attachments */
    c->buf = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    int st = 0;
    while (r->unqueued >= r->batch && !st && !cancelled(r)) st = flush_batch(r);
    if (!st && r->stages && r->stages->fetch) st = write_ready(r, false); /* what other processes sent meanwhile */
    return st;
}

/* What settling a file means for the store: its old entries removed (it is not a document any
 * more), or its stored mtime and size brought up to date (unchanged by content). */
static int settle_store(run *r, file_entry *f, file_ctx *c) {
    if (c->skip_reason && r->store) {
        modattn__note n;
        memset(&n, 0, sizeof n);
        n.size = c->size;
        n.mtime_ns = c->mtime;
        n.hash = c->hash;
        snprintf(n.what, sizeof n.what, "skipped");
        snprintf(n.reason, sizeof n.reason, "%s", c->skip_reason);
        int st = modattn__note_put(r->store, f->path, &n);
        if (st) return st;
    }
    if (c->drop) {
        int st = modattn_store_delete_document(r->store, f->path);
        return st < 0 ? st : 0;
    }
    if (c->touch) return modattn__store_touch_document(r->store, c->old.id, c->mtime, (int64_t)c->len);
    return 0;
}

/* A file's end (not queued): what it held freed; a file over the memory budget is an error for
 * this file and the run goes on (what the store had is kept); counted for the progress line. */
static int file_finish(run *r, file_entry *f, file_ctx *c, int st) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    modattn_free(c->buf);
    pdoc_free(c->d);
    if (c->stopped && !st) return 0;
    if (st == MODATTN_EBUDGET) {
        /* this file needs more than the memory budget leaves (reading, extracting, chunking or
         * its vectors): an error for this file, the run goes on; what the store had is kept */
        r->stats->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, f->path, "over the memory budget (--mem-budget): %s%s", modattn_last_error(),
              c->had == 1 ? " (its stored entries are kept)" : "");
        st = 0;
    }
    if (!st && !c->member) file_done(r, f->size);
    return st;
}

/* ---- archives walked as folders: every member a document of its own, "a.zip!/inner/file.txt" */

typedef struct arch_ctx {
    run *r;
    const char *path; /* the archive's ("a.zip", or "a.zip!/in/b.zip" nested) */
    int depth;        /* 1: an archive on disk */
    int64_t mtime;    /* the archive's on disk: its members' */
    pdoc *note;       /* the archive on disk's note: the members met */
    size_t *members;  /* counted across nesting */
    uint64_t *total;
    int st;           /* what stopped the walk (a run-stopping status) */
} arch_ctx;

static int index_member(arch_ctx *a, const char *path, const char *data, size_t n);

static int note_seen(pdoc *note, const char *path) {
    if (note->nseen == note->cseen) {
        size_t nc = note->cseen ? note->cseen * 2 : 16;
        char **nv = modattn__realloc(note->seen, nc * sizeof *nv, MODATTN_MEM_OTHER);
        if (!nv) return modattn__mem_last_status();
        note->seen = nv;
        note->cseen = nc;
    }
    if (!(note->seen[note->nseen] = modattn__strdup(path, MODATTN_MEM_OTHER))) return modattn__mem_last_status();
    note->nseen++;
    return 0;
}

static int on_member(void *ud, const char *name, const char *data, size_t n, const char *why) {
    arch_ctx *a = ud;
    run *r = a->r;
    if (cancelled(r)) return 1;
    char *path = modattn_archive_join(a->path, name);
    if (!path) return a->st = modattn__mem_last_status();
    int st = 0;
    if (why) {
        r->stats->files_seen++;
        r->stats->files_skipped++;
        a->note->member_errors = true;
        event(r, MODATTN_INDEX_ERROR, path, "%s", why);
        if (!modattn__name_escapes(name)) st = note_seen(a->note, path); /* what the store has of it stays */
    } else if (++*a->members > ARCHIVE_MAX_MEMBERS ||
               (*a->total += n) > (uint64_t)ARCHIVE_TOTAL_FACTOR * r->max_bytes) {
        a->note->archive_failed = true;
        event(r, MODATTN_INDEX_ERROR, path,
              "the archive holds more than %d members or %llu bytes (%d x --max-file-size): the rest is not read",
              ARCHIVE_MAX_MEMBERS, (unsigned long long)ARCHIVE_TOTAL_FACTOR * r->max_bytes, ARCHIVE_TOTAL_FACTOR);
        st = 1;
    } else {
        st = note_seen(a->note, path);
        if (!st) st = index_member(a, path, data, n);
    }
    modattn_free(path);
    if (st < 0) a->st = st;
    return st;
}

/* The members of the archive in buf (at a's path); an archive-level failure is said (an error for
 * the archive) and marks the note failed. */
static int walk_archive(arch_ctx *a, const char *buf, size_t len) {
    run *r = a->r;
    extract_mem(r);
    bool stopped = false;
    int st = modattn__walk_isolated(MODATTN__WALK_ARCHIVE, buf, len, r->xlim.max_text, &r->xlim, on_member, a, &stopped);
    if (a->st) return a->st;
    if (st == 1) return 0; /* stopped: said */
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) return st;
    if (st) {
        a->note->archive_failed = true;
        r->stats->files_seen++;
        r->stats->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, a->path, "cannot read the archive: %s", modattn_last_error());
    }
    return 0;
}

/* A member through the stages as a file would go (its bytes in memory, its time the archive's). */
static int index_member(arch_ctx *a, const char *path, const char *data, size_t n) {
    run *r = a->r;
    file_entry fe = {(char *)path, n, 0, 0};
    file_ctx c;
    memset(&c, 0, sizeof c);
    c.fd = -1;
    c.member = true;
    r->stats->files_seen++;
    if (r->store && (c.had = modattn__store_find_document(r->store, path, &c.old)) < 0) return c.had;
    int st = 0;
    c.mtime = a->mtime;
    c.size = (int64_t)n;
    c.same_chunking = c.had == 1 && c.old.chunk_tokens == r->chunk_tokens && c.old.overlap == (int32_t)r->overlap;
    if (n == 0) {
        settle_skip(r, &c, path, MODATTN_INDEX_SKIPPED, true, "empty file%s",
                    c.had == 1 ? " (its old entries removed)" : "");
    } else {
        if (!(c.buf = modattn__malloc(n + 1, MODATTN_MEM_OTHER))) return file_finish(r, &fe, &c, modattn__mem_last_status());
        memcpy(c.buf, data, n);
        c.buf[n] = '\0';
        c.len = c.file_len = n;
        c.hash = XXH3_64bits(c.buf, c.len);
        r->stats->bytes_read += n;
        st = classify_content(r, &fe, &c);
    }
    if (!st && !c.settled &&
        modattn_sniff_kind(path, (const unsigned char *)c.buf, c.len) == MODATTN_DOC_BINARY &&
        modattn_archive_sniff(path, (const unsigned char *)c.buf, c.len)) {
        if (a->depth >= MODATTN_ARCHIVE_MAX_DEPTH) {
            a->note->member_errors = true;
            settle_skip(r, &c, path, MODATTN_INDEX_ERROR, true, "an archive nested deeper than %d archives: not read",
                        MODATTN_ARCHIVE_MAX_DEPTH);
        } else {
            r->stats->files_seen--; /* its members are the documents */
            if (c.had == 1 && (st = modattn_store_delete_document(r->store, path)) > 0) st = 0;
            arch_ctx sub = *a;
            sub.path = path;
            sub.depth = a->depth + 1;
            if (!st) st = walk_archive(&sub, c.buf, c.len);
            return file_finish(r, &fe, &c, st);
        }
    }
    if (!st && !c.settled) st = load_document(r, &fe, &c);
    if (!st && !c.settled && !c.stopped) st = chunk_document(r, &fe, &c);
    if (!st && !c.settled && !c.stopped) st = route_document(r, &c);
    if (!st && c.settled && r->store) st = settle_store(r, &fe, &c);
    if (st || c.settled || c.stopped) return file_finish(r, &fe, &c, st);
    return embed_document(r, &c);
}

/* The documents the store has under "path!/" (members of an archive at path). */
typedef struct member_list {
    const char *prefix;
    size_t plen;
    char **v;
    size_t n, cap;
    int st;
} member_list;

static int collect_member(void *ud, const char *path) {
    member_list *l = ud;
    if (strncmp(path, l->prefix, l->plen) != 0) return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        char **nv = modattn__realloc(l->v, nc * sizeof *nv, MODATTN_MEM_OTHER);
        if (!nv) return l->st = modattn__mem_last_status();
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = modattn__strdup(path, MODATTN_MEM_OTHER))) return l->st = modattn__mem_last_status();
    l->n++;
    return 0;
}

/* Removes the stored members of the archive at path that are not in seen (sorted; NULL: all),
 * each said as pruned with why. */
static int drop_members(run *r, const char *path, char **seen, size_t nseen, const char *why) {
    member_list l = {0};
    char *prefix = modattn_archive_join(path, "");
    if (!prefix) return modattn__mem_last_status();
    l.prefix = prefix;
    l.plen = strlen(prefix);
    int st = modattn__store_each_path(r->store, collect_member, &l);
    if (l.st) st = l.st;
    for (size_t i = 0; i < l.n && !st; i++) {
        if (seen && bsearch(&l.v[i], seen, nseen, sizeof *seen, cmp_str)) continue;
        int k = modattn_store_delete_document(r->store, l.v[i]);
        if (k < 0) st = k;
        else if (k == 1) {
            r->stats->files_pruned++;
            event(r, MODATTN_INDEX_PRUNED, l.v[i], "%s", why);
        }
    }
    for (size_t i = 0; i < l.n; i++) modattn_free(l.v[i]);
    modattn_free(l.v);
    modattn_free(prefix);
    return st;
}

/* An archive on disk: its members through the stages, then its note queued after them. */
static int index_archive(run *r, file_entry *f, file_ctx *c) {
    r->stats->files_seen--; /* its members are the documents */
    int st = 0;
    if (c->had == 1 && r->store && (st = modattn_store_delete_document(r->store, f->path)) > 0) st = 0;
    pdoc *note = modattn__calloc(1, sizeof *note, MODATTN_MEM_OTHER);
    if (!note || !(note->path = modattn__strdup(f->path, MODATTN_MEM_OTHER))) {
        pdoc_free(note);
        return file_finish(r, f, c, modattn__mem_last_status());
    }
    note->archive_note = true;
    note->hash = c->hash;
    note->mtime_ns = c->mtime;
    note->size = (int64_t)c->file_len;
    size_t members = 0;
    uint64_t total = 0;
    arch_ctx a = {r, f->path, 1, c->mtime, note, &members, &total, 0};
    if (!st) st = walk_archive(&a, c->buf, c->len);
    if (st || cancelled(r)) {
        pdoc_free(note);
        if (cancelled(r) && !st) c->stopped = true;
        return file_finish(r, f, c, st);
    }
    close(c->fd);
    c->fd = -1;
    modattn_free(c->buf);
    c->buf = NULL;
    if (r->tail) r->tail->next = note;
    else r->head = note;
    r->tail = note;
    return write_ready(r, false); /* counted when its note is written */
}

/* An e-mail's attachments, each a document of its own (mail.eml!/report.pdf), queued before the
 * message itself: the message is written last, so that a kill before it leaves the message to be
 * read again, attachments and all. The attachments the store has that the message no longer
 * holds are removed after the new ones are written. */
static int index_attachments(run *r, file_entry *f, file_ctx *c) {
    pdoc *note = modattn__calloc(1, sizeof *note, MODATTN_MEM_OTHER);
    if (!note || !(note->path = modattn__strdup(f->path, MODATTN_MEM_OTHER))) {
        pdoc_free(note);
        return modattn__mem_last_status();
    }
    note->archive_note = note->container_doc = true;
    note->member = true; /* the message counts for progress */
    size_t members = 0;
    uint64_t total = 0;
    arch_ctx a = {r, f->path, 1, c->mtime, note, &members, &total, 0};
    extract_mem(r);
    bool stopped = false;
    int st = modattn__walk_isolated(c->d->kind == MODATTN_DOC_MBOX ? MODATTN__WALK_MBOX : MODATTN__WALK_MAIL, c->buf,
                                    c->len, r->xlim.max_text, &r->xlim, on_member, &a, &stopped);
    modattn_free(c->buf);
    c->buf = NULL;
    if (a.st) st = a.st;
    if (st == 1 || cancelled(r)) {
        st = 0;
        note->archive_failed = true;
    } else if (st && st != MODATTN_ENOMEM && st != MODATTN_EBUDGET) {
        /* the attachments could not be walked (the child died between them): said, and what the
         * store has of them stays */
        note->archive_failed = true;
        event(r, MODATTN_INDEX_ERROR, f->path, "cannot read its attachments: %s", modattn_last_error());
        st = 0;
    }
    if (st) {
        pdoc_free(note);
        return st;
    }
    if (r->tail) r->tail->next = note;
    else r->head = note;
    r->tail = note;
    return 0;
}

/* Written in queue order after its members: the members the store has under it that the walk did
 * not meet are removed, and (read whole, every member) its note says so for the next run. */
static int write_archive_note(run *r, pdoc *d) {
    if (!r->store || d->archive_failed) return 0;
    if (d->nseen > 1) qsort(d->seen, d->nseen, sizeof *d->seen, cmp_str);
    int st = drop_members(r, d->path, d->seen, d->nseen,
                          d->container_doc ? "no longer attached to the message" : "no longer in the archive");
    if (st || d->member_errors || d->container_doc) return st;
    modattn__note n;
    memset(&n, 0, sizeof n);
    n.size = d->size;
    n.mtime_ns = d->mtime_ns;
    n.hash = d->hash;
    snprintf(n.what, sizeof n.what, "archive");
    snprintf(n.reason, sizeof n.reason, "chunks of %d, overlap %zu", r->chunk_tokens, r->overlap);
    return modattn__note_put(r->store, d->path, &n);
}

/* One file through the stages. */
static int index_file(run *r, file_entry *f) {
    file_ctx c;
    int st = find_stored(r, f, &c);
    if (st) return st;
    st = classify_stat(r, f, &c);
    if (!st && !c.settled) st = read_content(r, f, &c);
    if (!st && !c.settled) st = classify_content(r, f, &c);
    if (!st && !c.settled &&
        modattn_sniff_kind(f->path, (const unsigned char *)c.buf, c.len) == MODATTN_DOC_BINARY &&
        modattn_archive_sniff(f->path, (const unsigned char *)c.buf, c.len))
        return index_archive(r, f, &c);
    /* an archive before, something else now: its members go */
    if (!st && !c.settled && r->store && c.noted == 1 && strcmp(c.note.what, "archive") == 0) {
        st = drop_members(r, f->path, NULL, 0, "its archive is not an archive any more");
        if (!st && (st = (int)modattn__note_delete(r->store, f->path, 0)) > 0) st = 0;
    }
    if (!st && !c.settled) st = load_document(r, f, &c);
    if (!st && !c.settled && !c.stopped) st = chunk_document(r, f, &c);
    if (!st && !c.settled && !c.stopped) st = route_document(r, &c);
    if (!st && c.settled) st = settle_store(r, f, &c);
    if (st || c.settled || c.stopped) return file_finish(r, f, &c, st);
    if (c.buf && (c.d->kind == MODATTN_DOC_EMAIL || c.d->kind == MODATTN_DOC_MBOX) &&
        (st = index_attachments(r, f, &c)))
        return file_finish(r, f, &c, st);
    return embed_document(r, &c);
}

/* One file classified for a plan (modattn__index_plan): a file the run would embed goes to fn
 * (new, or chunked otherwise: without reading it; else when its content changed); nothing in the
 * store changes. */
static int plan_file(run *r, file_entry *f, int (*fn)(void *ud, const char *path, uint64_t size), void *ud) {
    file_ctx c;
    int st = find_stored(r, f, &c);
    if (st) return st;
    st = classify_stat(r, f, &c);
    if (!st && !c.settled && c.same_chunking) {
        st = read_content(r, f, &c);
        if (!st && !c.settled) st = classify_content(r, f, &c);
    }
    if (!st && !c.settled) st = fn(ud, f->path, (uint64_t)c.size);
    return file_finish(r, f, &c, st);
}

/* A span of the trace per file: read, extract, chunk (and the batches a file fills). */
static void trace_file(uint64_t tr, const file_entry *f) {
    if (!tr) return;
    char shape[64];
    snprintf(shape, sizeof shape, "bytes=%llu", (unsigned long long)f->size);
    modattn__trace_end(tr, "index.read_extract_chunk", "pipeline", shape, (double)f->size, 0);
}

/* ---- batches */

/* The text of chunk i as embedded and stored: its bytes, ill-formed UTF-8 replaced by U+FFFD
 * (*clean then owns the copy). */
static int chunk_text(const pdoc *d, size_t i, const char **t, size_t *len, char **clean) {
    const modattn_chunk *c = &d->chunks[i];
    *t = d->text.text + c->start;
    *len = c->end - c->start;
    *clean = NULL;
    if (modattn__utf8_valid(*t, *len)) return 0;
    if (!(*clean = modattn__utf8_sanitize(*t, *len, len))) return modattn__mem_last_status();
    *t = *clean;
    return 0;
}

/* The head of the queue leaves it (written, or an error for its file) and counts as done. */
static void pop_doc(run *r) {
    pdoc *d = r->head;
    r->head = d->next;
    if (!r->head) r->tail = NULL;
    uint64_t size = (uint64_t)d->size;
    bool member = d->member;
    pdoc_free(d);
    if (member) return; /* counted with its archive */
    r->files_done++;
    r->bytes_done += size;
}

/* sink, the store's: the document, its chunks and their vectors in one transaction. 0 written;
 * 1 the memory budget ran out while writing it (rolled back whole, said: an error for this file,
 * the run goes on); else the status that stops the run. */
static int store_doc(run *r, pdoc *d) {
    int st;
    uint64_t tr = modattn__trace_begin(); /* span: one document's transaction */
    if ((st = modattn__store_begin(r->store))) return st;
    modattn_store_doc sd;
    memset(&sd, 0, sizeof sd);
    sd.path = d->path;
    sd.hash = d->hash;
    sd.mtime_ns = d->mtime_ns;
    sd.size = d->size;
    sd.kind = modattn_doc_kind_name(d->kind);
    sd.chunk_tokens = r->chunk_tokens;
    sd.overlap = (int32_t)r->overlap;
    sd.nchunks = (int64_t)d->nchunks;
    if ((st = modattn__store_put_document(r->store, &sd))) goto fail;
    if (d->drop_note && (st = (int)modattn__note_delete(r->store, d->path, 0)) > 0) st = 0;
    if (st) goto fail;
    for (size_t i = 0; i < d->nchunks; i++) {
        const modattn_chunk *c = &d->chunks[i];
        modattn_store_chunk_in ci;
        char *clean = NULL;
        if ((st = chunk_text(d, i, &ci.text, &ci.len, &clean))) goto fail;
        ci.seq = (int64_t)i;
        ci.start = (int64_t)c->start;
        ci.end = (int64_t)c->end;
        ci.line = chunk_line(d, c->start);
        ci.page = d->kind == MODATTN_DOC_PDF ? modattn_doc_text_locate(&d->text, c->start) : 0;
        ci.ntokens = d->ntok[i];
        st = modattn__store_put_chunk(r->store, sd.id, &ci, d->vecs + i * r->dim, r->dim);
        modattn_free(clean);
        /* its sparse vector in the same transaction: a kill or an error leaves both or neither */
        if (!st && d->sp)
            st = modattn__store_put_sparse(r->store, modattn__store_last_chunk(r->store), d->sp[i].ids,
                                           d->sp[i].weights, d->sp[i].n);
        if (st) goto fail;
    }
    if ((st = modattn__store_commit(r->store))) goto fail;
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "chunks=%zu", d->nchunks);
        modattn__trace_end(tr, "index.store", "sqlite", shape, 0, 0);
    }
    return 0;
fail:
    modattn__store_rollback(r->store);
    if ((st == MODATTN_EBUDGET || st == MODATTN_ENOMEM) && modattn__mem_last_status() == MODATTN_EBUDGET) {
        /* the memory budget ran out while writing this document (SQLite's pages count too): an
         * error for this file, rolled back whole; the run goes on */
        r->stats->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, d->path, "over the memory budget (--mem-budget) while storing it: %s",
              modattn_last_error());
        return 1;
    }
    return st;
}

/* Writes the head of the queue, every chunk embedded, to the sink (the store, or the caller's
 * stages->sink), and drops it. */
static int write_doc(run *r) {
    pdoc *d = r->head;
    int st;
    if (d->archive_note) {
        if ((st = write_archive_note(r, d))) return st;
        pop_doc(r);
        return 0;
    }
    if (r->stages && r->stages->sink) {
        modattn__index_doc doc = {d->path, d->hash, d->nchunks, r->dim, d->vecs, d->ntok};
        st = r->stages->sink(r->stages->ud, &doc);
    } else {
        st = store_doc(r, d);
    }
    if (st < 0) return st;
    if (st == 0) {
        r->stats->files_indexed++;
        event(r, MODATTN_INDEX_INDEXED, d->path, "%zu chunks", d->nchunks);
    }
    pop_doc(r);
    return 0;
}

/* The embedder's thread: the batch in slices (with a cancel hook: CANCEL_SLICE chunks a call, the
 * abort flag asked between them, so that a stop comes within a fraction of a second, not a whole
 * batch; the vectors are the same: a text's embedding does not depend on what it is batched with). */
static void *embed_batch(void *arg) {
    embedder *e = arg;
    batch *b = e->b;
    int st = 0;
    for (size_t o = 0; o < b->n && !st; o += e->step) {
        if (o && atomic_load(&e->abort)) {
            e->aborted = true;
            break;
        }
        size_t k = b->n - o < e->step ? b->n - o : e->step;
        modattn__fork_guard_enter();
        if ((st = modattn_model_embed_opt(e->model, NULL, e->eo, b->texts + o, b->lens + o, k, b->vec + o * e->dim,
                                          b->ntok + o))) {
            e->failed_at = o;
            snprintf(e->msg, sizeof e->msg, "%s", modattn_last_error());
        } else if (e->sparse && (st = modattn_sparse_encode(e->sparse, NULL, b->texts + o, b->lens + o, k, e->spo,
                                                            b->sp + o, NULL))) {
            e->failed_at = o;
            snprintf(e->msg, sizeof e->msg, "sparse vectors: %s", modattn_last_error());
        }
        modattn__fork_guard_leave();
    }
    pthread_mutex_lock(&e->mu);
    e->st = st;
    e->done = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* Hands batch b to the embedder (none may be running). */
static void batch_start(run *r, batch *b) {
    embedder *e = &r->emb;
    e->b = b;
    e->model = r->model;
    e->eo = &r->eo;
    e->sparse = r->opt->sparse;
    e->spo = r->opt->sparse_opt;
    e->dim = r->dim;
    e->step = r->opt->cancel ? CANCEL_SLICE : b->n;
    e->st = 0;
    e->failed_at = 0;
    e->aborted = false;
    e->msg[0] = '\0';
    e->done = false;
    atomic_store(&e->abort, false);
    e->running = true;
    e->threaded = pthread_create(&e->th, NULL, embed_batch, e) == 0;
    if (!e->threaded) embed_batch(e); /* no thread to be had: embedded here, in turn */
}

static void batch_clear(batch *b) {
    for (size_t i = 0; i < b->n; i++) {
        modattn_free(b->clean[i]);
        b->clean[i] = NULL;
    }
    if (b->sp) modattn_sparse_vec_free(b->sp, b->n); /* those not moved into their documents */
    b->n = 0;
}

/* Takes the running batch back (if any): waits for it, asking opt->cancel meanwhile when poll is
 * set (a stop aborts it: nothing of it is used), and puts its vectors into their documents. The
 * status (an embedding error stops the run). */
static int batch_wait(run *r, bool poll) {
    embedder *e = &r->emb;
    if (!e->running) return 0;
    pthread_mutex_lock(&e->mu);
    while (!e->done) {
        if (poll && r->opt->cancel && !atomic_load(&e->abort)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 20000000; /* 20 ms */
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&e->cv, &e->mu, &ts);
            if (e->done) break;
            pthread_mutex_unlock(&e->mu);
            if (cancelled(r)) atomic_store(&e->abort, true);
            pthread_mutex_lock(&e->mu);
        } else {
            if (!poll) atomic_store(&e->abort, true);
            pthread_cond_wait(&e->cv, &e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
    if (e->threaded) pthread_join(e->th, NULL);
    e->running = false;
    batch *b = e->b;
    int st = 0;
    if (e->st) {
        st = modattn__error(e->st, "%s", e->msg);
        st = modattn__error_prefix(st, "embedding %s", b->doc[e->failed_at]->path);
    } else if (!e->aborted && poll) {
        for (size_t i = 0; i < b->n; i++) {
            pdoc *d = b->doc[i];
            float *v = d->vecs + b->idx[i] * r->dim;
            memcpy(v, b->vec + i * r->dim, r->dim * sizeof(float));
            modattn__vec_normalize(v, r->dim);
            d->ntok[b->idx[i]] = b->ntok[i];
            if (b->sp && d->sp) { /* moved into the document */
                d->sp[b->idx[i]] = b->sp[i];
                memset(&b->sp[i], 0, sizeof b->sp[i]);
            }
            d->embedded++;
            r->stats->chunks_embedded++;
            r->stats->tokens_embedded += (uint64_t)b->ntok[i];
        }
    }
    batch_clear(b);
    return st;
}

/* Fills the next batch with queued chunks (across documents, in queue order) and starts it; then,
 * while it embeds, writes the documents the batch before it completed (in queue order, each in
 * one short transaction). So the batches, and each chunk's vector, are the ones a run that waited
 * for every batch would make, bit for bit; only the waiting is gone. With a memory budget the run
 * takes turns (waits for each batch before it reads on), so that what the budget refuses does not
 * depend on what the two threads hold at the moment. */
static int flush_batch(run *r) {
    batch *b = &r->bt[r->fill];
    size_t n = 0;
    int st = 0;
    for (pdoc *d = r->head; d && n < r->batch; d = d->next) {
        while (d->queued < d->nchunks && n < r->batch) {
            /* what is embedded is what is stored (chunk_text, again at write_doc) */
            const char *t;
            size_t len;
            if ((st = chunk_text(d, d->queued, &t, &len, &b->clean[n]))) goto fail;
            b->texts[n] = t;
            b->lens[n] = len;
            b->doc[n] = d;
            b->idx[n] = d->queued;
            d->queued++;
            n++;
            b->n = n;
        }
    }
    if (n == 0) return 0;
    r->unqueued -= n;
    /* the batch before: its vectors into their documents (a stop meanwhile: this one is not started) */
    if ((st = batch_wait(r, true))) goto fail;
    if (cancelled(r)) { /* what the batch before completed is written; this one is not started */
        batch_clear(b);
        if ((st = write_ready(r, false))) modattn__store_rollback(r->store);
        return st;
    }
    batch_start(r, b);
    r->fill ^= 1;
    if (r->emb_sync && (st = batch_wait(r, true))) goto fail;
    st = write_ready(r, false);
    if (!st) progress(r, false);
    if (st) modattn__store_rollback(r->store);
    return st;
fail:
    batch_clear(b);
    if (st) modattn__store_rollback(r->store);
    return st;
}

/* Writes the documents at the head of the queue whose vectors are all there, in queue order. In a
 * split write, a document another process embeds is complete once its vectors are fetched (wait:
 * until they come); one that will not come is handed to this process's batches. */
static int write_ready(run *r, bool wait) {
    int st = 0;
    while (!st && r->head) {
        pdoc *d = r->head;
        if (d->remote && d->embedded < d->nchunks) {
            int got = r->stages->fetch(r->stages->ud, d->path, d->hash, d->nchunks, r->dim, d->vecs, d->ntok, wait);
            if (got < 0) return got;
            if (got == 0) {
                if (wait) return modattn__error(MODATTN_EINVAL, "index: the vectors of %s did not come", d->path);
                return 0;
            }
            if (got == 2) { /* embedded here after all */
                d->remote = false;
                d->queued = 0;
                r->unqueued += d->nchunks;
                return 0;
            }
            d->embedded = d->nchunks;
            r->stats->chunks_embedded += d->nchunks;
            for (size_t i = 0; i < d->nchunks; i++) r->stats->tokens_embedded += (uint64_t)d->ntok[i];
        }
        if (d->embedded < d->nchunks) return 0;
        st = write_doc(r);
    }
    return st;
}

/* ---- prune */

typedef struct path_list {
    char **v;
    size_t n, cap;
    int st;
} path_list;

static int collect_path(void *ud, const char *path) {
    path_list *l = ud;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = modattn__realloc(l->v, nc * sizeof *nv, MODATTN_MEM_OTHER);
        if (!nv) return l->st = modattn__mem_last_status();
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = modattn__strdup(path, MODATTN_MEM_OTHER)))
        return l->st = modattn__mem_last_status();
    l->n++;
    return 0;
}

static int collect_note(void *ud, const char *path, const char *what) {
    (void)what;
    return collect_path(ud, path);
}

typedef struct stored_id {
    dev_t dev;
    ino_t ino;
    size_t idx; /* into the path list (in path order) */
} stored_id;

static int cmp_stored_ids(const void *a, const void *b) {
    const stored_id *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Stored documents that are one file (device, inode) under several names (a hard link indexed
 * by an earlier version, which did not know it): one is kept, the name the walk keeps (the first
 * stored), the others are removed. */
static int prune_same_files(run *r, const path_list *l) {
    stored_id *ids = modattn__malloc((l->n ? l->n : 1) * sizeof *ids, MODATTN_MEM_OTHER);
    if (!ids) return modattn__mem_last_status();
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct stat sb;
        if (stat(l->v[i], &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        ids[n++] = (stored_id){sb.st_dev, sb.st_ino, i};
    }
    qsort(ids, n, sizeof *ids, cmp_stored_ids);
    int st = 0;
    for (size_t i = 0; i < n && !st;) {
        size_t j = i + 1;
        while (j < n && ids[j].dev == ids[i].dev && ids[j].ino == ids[i].ino) j++;
        if (j - i > 1) {
            size_t keep = i;
            int64_t best = -1;
            for (size_t k = i; k < j; k++) {
                int64_t id = stored_id_of(r, l->v[ids[k].idx]);
                if (id >= 0 && (best < 0 || id < best)) {
                    best = id;
                    keep = k;
                }
            }
            for (size_t k = i; k < j && !st; k++) {
                if (k == keep) continue;
                int d = modattn_store_delete_document(r->store, l->v[ids[k].idx]);
                if (d < 0) st = d;
                else if (d == 1) {
                    r->stats->files_pruned++;
                    event(r, MODATTN_INDEX_PRUNED, l->v[ids[k].idx], "the same file as %s, which is kept",
                          l->v[ids[keep].idx]);
                }
            }
        }
        i = j;
    }
    modattn_free(ids);
    return st;
}

static int prune(run *r) {
    path_list l = {0};
    int st = modattn__store_each_path(r->store, collect_path, &l);
    if (!st) st = prune_same_files(r, &l);
    for (size_t i = 0; i < l.n && !st; i++) {
        struct stat sb;
        /* an archive's member lives as long as its archive (the walk of a changed archive
         * removes the members it no longer holds) */
        char *bang = strstr(l.v[i], "!/");
        if (bang) *bang = '\0';
        bool there = stat(l.v[i], &sb) == 0 && S_ISREG(sb.st_mode);
        bool unsure = !there && errno != ENOENT && errno != ENOTDIR && errno != ELOOP;
        if (bang) *bang = '!';
        if (there || unsure) continue; /* unsure: it may exist, don't drop what we cannot see */
        int k = modattn_store_delete_document(r->store, l.v[i]);
        if (k < 0) st = k;
        else if (k == 1) {
            r->stats->files_pruned++;
            event(r, MODATTN_INDEX_PRUNED, l.v[i], "the file no longer exists");
        }
    }
    for (size_t i = 0; i < l.n; i++) modattn_free(l.v[i]);
    modattn_free(l.v);
    /* the notes of files gone (archives, files skipped for their format) */
    path_list nl = {0};
    if (!st) st = modattn__note_each(r->store, collect_note, &nl);
    if (nl.st) st = nl.st;
    for (size_t i = 0; i < nl.n && !st; i++) {
        struct stat sb;
        if (stat(nl.v[i], &sb) == 0 && S_ISREG(sb.st_mode)) continue;
        if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP) continue;
        int64_t k = modattn__note_delete(r->store, nl.v[i], 0);
        if (k < 0) st = (int)k;
    }
    for (size_t i = 0; i < nl.n; i++) modattn_free(nl.v[i]);
    modattn_free(nl.v);
    return st;
}

/* ------------------------------------------------------------------ entry points */

/* The run's settings (chunking checked against the model), the store bound to the model, the
 * store's own files (never indexed), the batch buffers. The status; r is freed by run_free. */
static int run_setup(run *r, modattn_store *store, modattn_model *model, const modattn_index_options *opt,
                     modattn_index_stats *stats) {
    r->store = store;
    r->model = model;
    r->opt = opt;
    r->stats = stats;
    const modattn_model_info *info = modattn_model_get_info(model);
    modattn_store_model sm;
    int st = modattn_store_embed_options(store, model, opt->embed, false, &r->eo, &sm);
    if (st) return st;
    r->dim = sm.dim;
    r->tok = modattn_model_tokenizer(model);
    const size_t specials = modattn_tokenizer_num_specials(r->tok);
    /* the document prompt's word pieces share the model's max_seq_length with the chunk's */
    size_t ptoks = 0;
    if (sm.document_prompt && *sm.document_prompt) {
        int32_t pids[520];
        size_t pn = 0;
        if ((st = modattn_model_tokenize(model, sm.document_prompt, strlen(sm.document_prompt), pids, 520, &pn)))
            return st;
        ptoks = pn > specials ? pn - specials : 0;
    }
    const size_t room = info->max_tokens > ptoks ? info->max_tokens - ptoks : 0;
    size_t ct = opt->chunk_tokens ? opt->chunk_tokens : room;
    if (ct > room || ct <= specials) {
        if (ptoks)
            return modattn__error(MODATTN_EINVAL, "--chunk-tokens %zu: must be in [%zu, %zu] for model %s (its "
                                 "max_seq_length is %zu, [CLS]/[SEP] included, and the document prompt takes "
                                 "%zu word pieces of it)", ct, specials + 1, room, info->name, info->max_tokens,
                                 ptoks);
        return modattn__error(MODATTN_EINVAL, "--chunk-tokens %zu: must be in [%zu, %zu] for model %s "
                             "(its max_seq_length is %zu, [CLS]/[SEP] included)", ct, specials + 1,
                             info->max_tokens, info->name, info->max_tokens);
    }
    r->chunk_tokens = (int32_t)ct;
    r->window = ct - specials;
    if (opt->overlap < 0) {
        r->overlap = MODATTN_INGEST_DEFAULT_OVERLAP;
        if (r->overlap > r->window / 4) r->overlap = r->window / 4;
    } else if ((size_t)opt->overlap >= r->window) {
        return modattn__error(MODATTN_EINVAL, "--overlap %ld: must be smaller than the chunk's %zu "
                             "word pieces (--chunk-tokens %zu less %zu special tokens)",
                             opt->overlap, r->window, ct, specials);
    } else {
        r->overlap = (size_t)opt->overlap;
    }
    r->max_bytes = opt->max_file_bytes ? opt->max_file_bytes : MODATTN_INGEST_DEFAULT_MAX_FILE_BYTES;
    r->batch = opt->batch_chunks ? opt->batch_chunks : DEFAULT_BATCH_CHUNKS;
    if (r->batch > 65536) r->batch = 65536;
    r->xlim.timeout_s = opt->file_timeout_s > 0    ? opt->file_timeout_s
                        : opt->file_timeout_s == 0 ? MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S
                                                   : 0;
    r->xlim.max_text = r->max_bytes > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)r->max_bytes;
    r->xlim.cancel = extract_cancel;
    r->xlim.cancel_ud = r;

    if (store && (st = modattn__store_bind_model(store, &sm))) return st;
    r->bound = true;
    /* sparse vectors: every chunk of a store has one, or none has */
    if (opt->sparse && r->stages)
        return modattn__error(MODATTN_EUNSUPPORTED, "sparse vectors (--sparse) are not kept by a split run (--mpi)");
    if (store && opt->sparse) {
        const modattn_sparse_info *si = modattn_sparse_get_info(opt->sparse);
        const modattn_model_info *mi = modattn_model_get_info(modattn_sparse_model(opt->sparse));
        modattn__sparse_ident id;
        memset(&id, 0, sizeof id);
        snprintf(id.name, sizeof id.name, "%s", si->name ? si->name : "");
        snprintf(id.identity, sizeof id.identity, "%s", mi->identity);
        char *abs = si->dir ? modattn__path_absolute(si->dir) : NULL;
        snprintf(id.dir, sizeof id.dir, "%s", abs ? abs : si->dir ? si->dir : "");
        modattn_free(abs);
        id.top_k = opt->sparse_opt ? opt->sparse_opt->top_k : 0;
        id.threshold = opt->sparse_opt ? opt->sparse_opt->threshold : 0.0f;
        if ((st = modattn__store_sparse_bind(store, &id))) return st;
    } else if (store && modattn__store_has_sparse(store)) {
        modattn__sparse_ident have;
        bool found = false;
        if ((st = modattn__store_sparse_get(store, &have, &found))) return st;
        return modattn__error(MODATTN_EINVAL, "%s: the store keeps sparse vectors (%s): index it with --sparse %s",
                              modattn_store_path(store), have.name, have.dir[0] ? have.dir : have.name);
    }

    /* the store's own files are never indexed */
    r->own[0] = store ? modattn__path_absolute(modattn_store_path(store)) : NULL;
    if (r->own[0]) {
        static const char *const sfx[] = {"-wal", "-shm", "-journal", ".vec"};
        size_t n0 = strlen(r->own[0]);
        for (int i = 0; i < 4; i++) {
            r->own[i + 1] = modattn__malloc(n0 + 9, MODATTN_MEM_OTHER);
            if (r->own[i + 1]) snprintf(r->own[i + 1], n0 + 9, "%s%s", r->own[0], sfx[i]);
        }
    }
    for (int i = 0; i < 5; i++) r->skip_paths[i] = r->own[i];
    if (r->own[0]) {
        char *slash = strrchr(r->own[0], '/');
        struct stat db_dir;
        *slash = '\0';
        if (stat(r->own[0][0] ? r->own[0] : "/", &db_dir) == 0) {
            r->have_store_dir = true;
            r->store_dev = db_dir.st_dev;
            r->store_ino = db_dir.st_ino;
            r->store_base = slash + 1;
        }
        *slash = '/';
    }

    /* two batches: one filled while the other embeds (counted against the memory budget) */
    for (int i = 0; i < 2; i++) {
        batch *b = &r->bt[i];
        b->texts = modattn__malloc(r->batch * sizeof *b->texts, MODATTN_MEM_OTHER);
        b->lens = modattn__malloc(r->batch * sizeof *b->lens, MODATTN_MEM_OTHER);
        b->clean = modattn__calloc(r->batch, sizeof *b->clean, MODATTN_MEM_OTHER);
        b->doc = modattn__malloc(r->batch * sizeof *b->doc, MODATTN_MEM_OTHER);
        b->idx = modattn__malloc(r->batch * sizeof *b->idx, MODATTN_MEM_OTHER);
        b->vec = modattn__malloc(r->batch * r->dim * sizeof(float), MODATTN_MEM_INDEX);
        b->ntok = modattn__malloc(r->batch * sizeof *b->ntok, MODATTN_MEM_OTHER);
        if (opt->sparse && !(b->sp = modattn__calloc(r->batch, sizeof *b->sp, MODATTN_MEM_OTHER)))
            return modattn__mem_last_status();
        if (!b->texts || !b->lens || !b->clean || !b->doc || !b->idx || !b->vec || !b->ntok)
            return modattn__mem_last_status();
    }
    /* with a memory budget the run takes turns with the model (flush_batch says why) */
    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    r->emb_sync = ms.budget > 0;
    return 0;
}

/* The walk: every path given (files and folders, recursively), the same file under two names
 * (a folder and a file in it, a link, a hard link) once. */
static int run_walk(run *r, const char *const *paths, size_t npaths) {
    int st = 0;
    for (size_t i = 0; i < npaths && !st; i++) {
        char *abs = modattn__path_absolute(paths[i]);
        if (!abs) return modattn__mem_last_status();
        st = walk(r, abs, true);
        modattn_free(abs);
    }
    if (!st) dedupe_files(r);
    return st;
}

/* Every file through the stages, then the documents still queued (a split write waits for the
 * vectors other processes send). */
static int run_files(run *r) {
    int st = 0;
    r->t0_ns = modattn__now_ns();
    progress(r, true);
    for (size_t i = 0; i < r->nfiles && !st && !cancelled(r); i++) {
        uint64_t tr = modattn__trace_begin();
        st = index_file(r, &r->files[i]);
        trace_file(tr, &r->files[i]);
    }
    while (!st && r->head && !cancelled(r)) {
        if (r->unqueued) st = flush_batch(r);
        else if (r->emb.running) {
            if (!(st = batch_wait(r, true)) && (st = write_ready(r, false))) modattn__store_rollback(r->store);
        } else if (r->head->remote) st = write_ready(r, true);
        else st = modattn__error(MODATTN_EINVAL, "index: %s is queued with nothing to embed", r->head->path);
    }
    if (!st) progress(r, true);
    return st;
}

/* After the documents: prune, then the vector file, then the ANN index. */
static int run_store_files(run *r) {
    modattn_store *store = r->store;
    const modattn_index_options *opt = r->opt;
    modattn_index_stats *stats = r->stats;
    int st = 0;
    /* 3. prune */
    if (opt->prune) st = prune(r);

    /* 4. the vector file, when the store has changed since it was written: appended to, or
     * rewritten whole (missing, damaged, due for compaction). Failing to write it loses nothing
     * (searches read the store) and does not fail the run: stats say why. */
    if (!st) {
        modattn_vecfile_update u;
        int w = modattn_store_update_vector_file(store, &u);
        if (w == MODATTN_ENOMEM || w == MODATTN_EBUDGET) {
            st = w;
        } else if (w) {
            snprintf(stats->vector_file_error, sizeof stats->vector_file_error, "%s", modattn_last_error());
        } else if (u.action != MODATTN_VECFILE_CURRENT) {
            stats->vector_file_written = true;
            stats->vector_file_appended = u.action == MODATTN_VECFILE_APPENDED;
            stats->vector_file_rows_added = u.rows_added;
            stats->vector_file_rows_masked = u.rows_masked;
            snprintf(stats->vector_file_reason, sizeof stats->vector_file_reason, "%s", u.reason);
        }
    }
    /* 5. the ANN index, when there is one, after the vector file it is made from */
    if (!st && !stats->vector_file_error[0]) {
        int w = modattn_store_update_ann(store, MODATTN_ANN_NONE, NULL, false, opt->ann_exec, NULL, NULL, &stats->ann);
        if (w == MODATTN_ENOMEM || w == MODATTN_EBUDGET) st = w;
        else if (w) snprintf(stats->ann_error, sizeof stats->ann_error, "%s", modattn_last_error());
    }

    return st;
}

static void run_free(run *r) {
    (void)batch_wait(r, false); /* a batch still embedding (the run stopped): waited for, unused */
    if (r->store) modattn__store_rollback(r->store);
    while (r->head) {
        pdoc *n = r->head->next;
        pdoc_free(r->head);
        r->head = n;
    }
    for (size_t i = 0; i < r->nfiles; i++) modattn_free(r->files[i].path);
    modattn_free(r->files);
    modattn_free(r->dirs);
    for (int k = 0; k < 2; k++) {
        batch *b = &r->bt[k];
        if (b->clean)
            for (size_t i = 0; i < r->batch; i++) modattn_free(b->clean[i]);
        modattn_free(b->texts);
        modattn_free(b->lens);
        modattn_free(b->clean);
        modattn_free(b->doc);
        modattn_free(b->idx);
        modattn_free(b->vec);
        modattn_free(b->ntok);
        if (b->sp) modattn_sparse_vec_free(b->sp, r->batch);
        modattn_free(b->sp);
    }
    pthread_cond_destroy(&r->emb.cv);
    pthread_mutex_destroy(&r->emb.mu);
    for (int i = 0; i < 5; i++) modattn_free(r->own[i]);
}

int modattn_index_paths(modattn_store *store, modattn_model *model, const char *const *paths,
                        size_t npaths, const modattn_index_options *opt,
                        modattn_index_stats *stats) {
    return modattn__index_run(store, model, paths, npaths, opt, NULL, stats);
}

static const modattn_index_options *default_options(const modattn_index_options *opt, modattn_index_options *defaults) {
    if (opt) return opt;
    memset(defaults, 0, sizeof *defaults);
    defaults->overlap = -1;
    return defaults;
}

int modattn__index_run(modattn_store *store, modattn_model *model, const char *const *paths, size_t npaths,
                       const modattn_index_options *opt, const modattn__index_stages *stages,
                       modattn_index_stats *stats) {
    if (!stats) return modattn__error(MODATTN_EINVAL, "modattn_index_paths: stats is NULL");
    memset(stats, 0, sizeof *stats);
    if (stages && !stages->remote != !stages->fetch)
        return modattn__error(MODATTN_EINVAL, "modattn__index_run: set remote with fetch, or neither");
    if ((!store && !(stages && stages->sink)) || !model || (!paths && npaths))
        return modattn__error(MODATTN_EINVAL, "modattn_index_paths: NULL argument");
    modattn_index_options defaults;
    run r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.emb.mu, NULL);
    pthread_cond_init(&r.emb.cv, NULL);
    r.stages = stages;
    int st = run_setup(&r, store, model, default_options(opt, &defaults), stats);
    if (st && !r.bound) return st; /* nothing allocated yet */
    if (!st) st = run_walk(&r, paths, npaths);
    if (!st) st = run_files(&r);
    if (r.stop) stats->cancelled = true; /* what is committed stays; the rest (the queue, prune, vector file) waits */
    else if (!st && store) st = run_store_files(&r);
    run_free(&r);
    return st;
}

int modattn__index_plan(modattn_store *store, modattn_model *model, const char *const *paths, size_t npaths,
                        const modattn_index_options *opt, int (*fn)(void *ud, const char *path, uint64_t size),
                        void *ud, modattn_index_stats *stats) {
    if (!stats) return modattn__error(MODATTN_EINVAL, "modattn_index_paths: stats is NULL");
    memset(stats, 0, sizeof *stats);
    if (!store || !model || !fn || (!paths && npaths))
        return modattn__error(MODATTN_EINVAL, "modattn__index_plan: NULL argument");
    modattn_index_options defaults;
    run r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.emb.mu, NULL);
    pthread_cond_init(&r.emb.cv, NULL);
    int st = run_setup(&r, store, model, default_options(opt, &defaults), stats);
    if (st && !r.bound) return st;
    if (!st) st = run_walk(&r, paths, npaths);
    r.t0_ns = modattn__now_ns();
    if (!st) progress(&r, true);
    for (size_t i = 0; !st && i < r.nfiles && !cancelled(&r); i++) {
        uint64_t tr = modattn__trace_begin();
        st = plan_file(&r, &r.files[i], fn, ud);
        trace_file(tr, &r.files[i]);
    }
    if (!st) progress(&r, true);
    if (r.stop) stats->cancelled = true;
    run_free(&r);
    return st;
}
