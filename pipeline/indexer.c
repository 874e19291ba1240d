/* pipeline/indexer.c — `modattn index`: walk the paths, decide per file (unchanged, skipped,
 * (re)indexed), extract and chunk the text, embed the chunks in batches that span documents, and
 * write every document in its own transaction.
 *
 * Flow. The walk lists regular files first (so the progress line knows the total). Each file is
 * then looked up in the store: same size and mtime (and chunking) means unchanged without reading
 * it; otherwise it is read (at most max_file_bytes, checked before reading), hashed with XXH3, and
 * compared by content. New or changed documents join a queue of chunks; whenever the queue holds
 * a batch, the batch is embedded (batches span documents). A document's vectors are kept until
 * its last chunk is embedded; then the document, its chunks and their vectors are written in one
 * short transaction. So the store's write lock is never held while the model runs (another
 * writer waits milliseconds, not minutes), and a kill leaves every document complete or absent.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "modattn/tokenizer.h"
#include "pipeline/pipeline_internal.h"

#define DEFAULT_BATCH_CHUNKS 64
#define CANCEL_SLICE 8 /* chunks per model call when a cancel hook is set */
/* HTML files up to this size are extracted in this process: a child costs a fork (a few ms, ten
 * times a small page's extraction), and libxml2's worst case on 16 KiB (quadratic markup: 1,500
 * attributes on one element) is some 30 ms and a few MB. PDFs always go to a child: a few KB of
 * FlateDecode can expand a thousandfold. */
#define SMALL_HTML_BYTES 16384

/* ------------------------------------------------------------------ paths */

char *modattn_path_absolute(const char *path) {
    if (!path) return NULL;
    char cwd[4096] = "";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) {
        modattn_error(MODATTN_EIO, "cannot read the current directory: %s", strerror(errno));
        return NULL;
    }
    size_t cap = strlen(cwd) + strlen(path) + 3;
    char *in = modattn_malloc(cap, MODATTN_MEM_OTHER);
    char *out = modattn_malloc(cap, MODATTN_MEM_OTHER);
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
    char *p = modattn_malloc(a + b + 2, MODATTN_MEM_OTHER);
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
    int64_t doc_id;
    bool remote;     /* split write: another process embeds it (its vectors are fetched) */
    /* incremental line counting for text files */
    size_t line_off;
    int64_t line_no;
    struct pdoc *next;
} pdoc;

typedef struct run {
    modattn_store *store;
    modattn_model *model;
    const modattn_tokenizer *tok; /* the model's (borrowed) */
    const modattn_index_options *opt;
    modattn_index_stats *stats;
    const modattn_index_split *split; /* NULL: a plain run */
    bool plan_mode, emit_mode, write_split;
    size_t dim, window, overlap, batch;
    int32_t chunk_tokens;
    uint64_t max_bytes;
    const char *skip_paths[5]; /* the store's own files, by path ... */
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
    /* batch buffers */
    const char **btexts;
    size_t *blens;
    char **bclean;
    pdoc **bdoc;
    size_t *bidx;
    float *bvec;
    int32_t *bntok;
    /* progress */
    uint64_t bytes_total, bytes_done, files_done;
    uint64_t t0_ns, last_progress_ns;
    /* HTML and PDF extraction: its limits (pipeline/extract.c) */
    modattn__extract_limits xlim;
    bool stop; /* opt->cancel said so */
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
    uint64_t now = modattn_now_ns();
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
        file_entry *n = modattn_realloc(r->files, nc * sizeof *n, MODATTN_MEM_OTHER);
        if (!n) return modattn_mem_last_status();
        r->files = n;
        r->fcap = nc;
    }
    char *p = modattn_strdup(path, MODATTN_MEM_OTHER);
    if (!p) return modattn_mem_last_status();
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
            char **nn = modattn_realloc(names, nc * sizeof *nn, MODATTN_MEM_OTHER);
            if (!nn) {
                st = modattn_mem_last_status();
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = modattn_strdup(e->d_name, MODATTN_MEM_OTHER))) {
            st = modattn_mem_last_status();
            break;
        }
        n++;
    }
    closedir(d);
    if (!st) {
        if (n > 1) qsort(names, n, sizeof *names, cmp_str);
        if (r->ndirs == r->dcap) {
            size_t nc = r->dcap ? r->dcap * 2 : 16;
            dir_id *nd = modattn_realloc(r->dirs, nc * sizeof *nd, MODATTN_MEM_OTHER);
            if (!nd) st = modattn_mem_last_status();
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
                st = modattn_mem_last_status();
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
    if (!r->store || r->emit_mode || modattn_store_find_document(r->store, path, &d) != 1) return -1;
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
    modattn_free(d->path);
    modattn_doc_text_clear(&d->text);
    modattn_free(d->chunks);
    modattn_free(d->vecs);
    modattn_free(d->ntok);
    modattn_free(d);
}

/* A file that is not indexed any more: remove what the store had for it. */
static int drop_stale(run *r, const char *path, bool had) {
    if (!had || r->plan_mode) return 0; /* a plan changes nothing */
    int st = modattn_store_delete_document(r->store, path);
    return st < 0 ? st : 0;
}

/* Reads the whole file (size known to be <= the cap). *err gets errno on failure. */
static char *read_fd(int fd, size_t size, size_t *got, int *err) {
    char *buf = modattn_malloc(size + 1, MODATTN_MEM_OTHER);
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

static int flush_batch(run *r);
static int write_ready(run *r, bool wait);

static int process_file_inner(run *r, file_entry *f);

/* One file: read, extract, chunk, queue its chunks for embedding (a trace span per file). */
static int process_file(run *r, file_entry *f) {
    uint64_t tr = modattn_trace_begin();
    int st = process_file_inner(r, f);
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "bytes=%llu", (unsigned long long)f->size);
        modattn_trace_end(tr, "index.read_extract_chunk", "pipeline", shape, (double)f->size, 0);
    }
    return st;
}

/* finding a stored name of the file (dev, ino) among documents of the same content */
typedef struct same_file {
    dev_t dev;
    ino_t ino;
    char *path; /* found: modattn_strdup'd */
    int st;
} same_file;

static int find_same_file(void *ud, const char *path) {
    same_file *sf = ud;
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_dev != sf->dev || sb.st_ino != sf->ino) return 0;
    if (!(sf->path = modattn_strdup(path, MODATTN_MEM_OTHER))) return sf->st = modattn_mem_last_status();
    return 1;
}

static int process_file_inner(run *r, file_entry *f) {
    modattn_index_stats *s = r->stats;
    s->files_seen++;
    modattn_store_doc old;
    /* a split run's embed part has no store: every file it is given is to be embedded */
    int had = r->emit_mode ? 0 : modattn_store_find_document(r->store, f->path, &old);
    if (had < 0) return had;
    if (had == 0 && !r->emit_mode) {
        /* reached through a link this time, stored under its own name by an earlier run: it is
         * that document */
        char *canon = realpath(f->path, NULL);
        if (canon && strcmp(canon, f->path) != 0) {
            int k = modattn_store_find_document(r->store, canon, &old);
            if (k < 0) {
                free(canon);
                return k;
            }
            char *p = k == 1 ? modattn_strdup(canon, MODATTN_MEM_OTHER) : NULL;
            if (k == 1 && !p) {
                free(canon);
                return modattn_mem_last_status();
            }
            if (p) {
                modattn_free(f->path);
                f->path = p;
                had = 1;
            }
        }
        free(canon);
    }
    int fd = open(f->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        s->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, f->path, "cannot read: %s", strerror(err));
        file_done(r, f->size);
        return 0;
    }
    int st = 0;
    char *buf = NULL;
    pdoc *d = NULL;
    if (!S_ISREG(sb.st_mode)) {
        s->files_skipped++;
        event(r, MODATTN_INDEX_SKIPPED, f->path, "%s", type_name(sb.st_mode));
        goto out;
    }
    const int64_t mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    const int64_t size = (int64_t)sb.st_size;
    bool same_chunking = had == 1 && old.chunk_tokens == r->chunk_tokens && old.overlap == (int32_t)r->overlap;
    if (size == 0) {
        s->files_skipped++;
        event(r, MODATTN_INDEX_SKIPPED, f->path, "empty file%s",
              had == 1 ? " (its old entries removed)" : "");
        st = drop_stale(r, f->path, had == 1);
        goto out;
    }
    if ((uint64_t)size > r->max_bytes) {
        s->files_skipped++;
        event(r, MODATTN_INDEX_SKIPPED, f->path,
              "%lld bytes, over the size cap of %llu bytes (--max-file-size)%s",
              (long long)size, (unsigned long long)r->max_bytes,
              had == 1 ? " (its old entries removed)" : "");
        st = drop_stale(r, f->path, had == 1);
        goto out;
    }
    if (same_chunking && old.size == size && old.mtime_ns == mtime) {
        s->files_unchanged++;
        goto out;
    }
    if (r->plan_mode && !same_chunking) { /* new, or chunked otherwise: embedded whatever it holds */
        st = r->split->plan(r->split->ud, f->path, (uint64_t)size);
        goto out;
    }
    size_t len = 0;
    int err = 0;
    buf = read_fd(fd, (size_t)size, &len, &err);
    if (!buf) {
        if (err == ENOMEM) {
            st = modattn_mem_last_status();
            goto out;
        }
        s->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, f->path, "cannot read: %s", strerror(err));
        goto out;
    }
    s->bytes_read += len;
    const uint64_t hash = XXH3_64bits(buf, len);
    if (had == 0 && r->store && sb.st_nlink > 1) {
        /* a hard link to a file stored under another name (the same device and inode, the same
         * content): it is that document, as a symbolic link is */
        same_file sf = {sb.st_dev, sb.st_ino, NULL, 0};
        int k = modattn__store_paths_with_hash(r->store, hash, (int64_t)len, find_same_file, &sf);
        if (k < 0 && !sf.st) {
            st = k;
            goto out;
        }
        if (sf.st) {
            st = sf.st;
            goto out;
        }
        if (sf.path) {
            int f2 = modattn_store_find_document(r->store, sf.path, &old);
            if (f2 < 0) {
                modattn_free(sf.path);
                st = f2;
                goto out;
            }
            if (f2 == 1) {
                modattn_free(f->path);
                f->path = sf.path;
                had = 1;
                same_chunking = old.chunk_tokens == r->chunk_tokens && old.overlap == (int32_t)r->overlap;
            } else {
                modattn_free(sf.path);
            }
        }
    }
    if (same_chunking && old.hash == hash) {
        s->files_unchanged++;
        if (!r->plan_mode && (old.mtime_ns != mtime || old.size != (int64_t)len))
            st = modattn_store_touch_document(r->store, old.id, mtime, (int64_t)len);
        goto out;
    }
    if (r->plan_mode) { /* changed: the rest (kind, text, chunks) is the embed part's */
        st = r->split->plan(r->split->ud, f->path, (uint64_t)size);
        goto out;
    }
    modattn_doc_kind kind = modattn_sniff_kind(f->path, (const unsigned char *)buf, len);
    if (kind == MODATTN_DOC_BINARY) {
        s->files_skipped++;
        event(r, MODATTN_INDEX_SKIPPED, f->path, "binary file%s",
              had == 1 ? " (its old entries removed)" : "");
        st = drop_stale(r, f->path, had == 1);
        goto out;
    }
    const size_t file_len = len; /* what was read; the text may be longer once decoded */
    if (modattn_utf16_bom(buf, len)) {
        /* UTF-16 text: indexed as its UTF-8 decoding (byte ranges then point into that) */
        size_t n = 0;
        char *u8 = modattn_utf16_to_utf8(buf, len, &n);
        if (!u8) {
            st = modattn_mem_last_status();
            goto out;
        }
        modattn_free(buf);
        buf = u8;
        len = n;
    }
    d = modattn_calloc(1, sizeof *d, MODATTN_MEM_OTHER);
    if (!d || !(d->path = modattn_strdup(f->path, MODATTN_MEM_OTHER))) {
        st = modattn_mem_last_status();
        goto out;
    }
    d->hash = hash;
    d->mtime_ns = mtime;
    d->size = (int64_t)file_len;
    d->kind = kind;
    d->line_no = 1;
    size_t from = 0; /* a UTF-8 byte order mark is not text */
    if (kind == MODATTN_DOC_HTML || kind == MODATTN_DOC_PDF) {
        /* in a child process, under the memory and time limits (pipeline/extract.c) */
        bool stopped = false;
        if (r->opt->extract_mem_bytes) {
            r->xlim.mem_bytes = r->opt->extract_mem_bytes;
        } else {
            /* what the memory budget leaves now is the extracting library's */
            modattn_mem_stats ms;
            modattn_mem_get_stats(&ms);
            r->xlim.mem_bytes = ms.budget <= 0                 ? MODATTN_INGEST_DEFAULT_EXTRACT_MEM
                                : ms.budget > ms.current_total ? (uint64_t)(ms.budget - ms.current_total)
                                                               : 1;
        }
        if (kind == MODATTN_DOC_HTML && len <= SMALL_HTML_BYTES) /* see SMALL_HTML_BYTES */
            st = modattn_extract_html(buf, len, &d->text);
        else
            st = modattn__extract_isolated(kind, buf, len, &r->xlim, &d->text, &stopped);
        modattn_free(buf);
        buf = NULL;
        if (stopped) { /* the caller asked to stop: this file is not done, nor counted */
            s->files_seen--;
            if (fd >= 0) close(fd);
            pdoc_free(d);
            return 0;
        }
        if (st) {
            if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) goto out;
            s->files_skipped++;
            event(r, MODATTN_INDEX_ERROR, f->path, "cannot extract its text: %s",
                  modattn_last_error());
            st = drop_stale(r, f->path, had == 1);
            goto out;
        }
    } else {
        d->text.text = buf; /* the file's bytes are the text: ranges point into the file */
        d->text.len = len;
        buf = NULL;
        if (len >= 3 && memcmp(d->text.text, "\xef\xbb\xbf", 3) == 0) from = 3;
    }
    st = modattn_chunk_text(r->tok, d->text.text + from, d->text.len - from, r->window, r->overlap,
                            &d->chunks, &d->nchunks);
    if (st) goto out;
    for (size_t i = 0; i < d->nchunks; i++) {
        d->chunks[i].start += from;
        d->chunks[i].end += from;
    }
    if (d->nchunks == 0) {
        s->files_skipped++;
        event(r, MODATTN_INDEX_SKIPPED, f->path, "no text to index%s",
              had == 1 ? " (its old entries removed)" : "");
        st = drop_stale(r, f->path, had == 1);
        goto out;
    }
    d->vecs = modattn_malloc(d->nchunks * r->dim * sizeof(float), MODATTN_MEM_INDEX);
    d->ntok = modattn_malloc(d->nchunks * sizeof(int32_t), MODATTN_MEM_OTHER);
    if (!d->vecs || !d->ntok) {
        st = modattn_mem_last_status();
        goto out;
    }
    if (r->write_split) { /* embedded by another process? then its chunks join no batch here */
        int rem = r->split->remote(r->split->ud, d->path);
        if (rem < 0) {
            st = rem;
            goto out;
        }
        d->remote = rem == 1;
        if (d->remote) d->queued = d->nchunks;
    }
    /* into the queue; it is counted when it is committed */
    if (r->tail) r->tail->next = d;
    else r->head = d;
    r->tail = d;
    if (!d->remote) r->unqueued += d->nchunks;
    d = NULL;
    close(fd);
    fd = -1;
    while (r->unqueued >= r->batch && !st && !cancelled(r)) st = flush_batch(r);
    if (!st && r->write_split) st = write_ready(r, false); /* what other processes sent meanwhile */
    return st;
out:
    if (fd >= 0) close(fd);
    modattn_free(buf);
    pdoc_free(d);
    if (st == MODATTN_EBUDGET) {
        /* this file needs more than the memory budget leaves (reading, extracting, chunking or
         * its vectors): an error for this file, the run goes on; what the store had is kept */
        s->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, f->path, "over the memory budget (--mem-budget): %s%s", modattn_last_error(),
              had == 1 ? " (its stored entries are kept)" : "");
        st = 0;
    }
    if (!st) file_done(r, f->size);
    return st;
}

/* ---- batches */

/* The text of chunk i as embedded and stored: its bytes, ill-formed UTF-8 replaced by U+FFFD
 * (*clean then owns the copy). */
static int chunk_text(const pdoc *d, size_t i, const char **t, size_t *len, char **clean) {
    const modattn_chunk *c = &d->chunks[i];
    *t = d->text.text + c->start;
    *len = c->end - c->start;
    *clean = NULL;
    if (modattn_utf8_valid(*t, *len)) return 0;
    if (!(*clean = modattn_utf8_sanitize(*t, *len, len))) return modattn_mem_last_status();
    *t = *clean;
    return 0;
}

/* Writes the head of the queue, every chunk embedded, in one transaction, and drops it. */
static int write_doc(run *r) {
    pdoc *d = r->head;
    int st;
    if (r->emit_mode) { /* a split run's embed part: the vectors go to the writer instead */
        if ((st = r->split->emit(r->split->ud, d->path, d->hash, d->nchunks, r->dim, d->vecs, d->ntok))) return st;
        r->stats->files_indexed++;
        event(r, MODATTN_INDEX_INDEXED, d->path, "%zu chunks", d->nchunks);
        r->head = d->next;
        if (!r->head) r->tail = NULL;
        uint64_t size = (uint64_t)d->size;
        pdoc_free(d);
        r->files_done++;
        r->bytes_done += size;
        return 0;
    }
    uint64_t tr = modattn_trace_begin(); /* span: one document's transaction */
    if ((st = modattn_store_begin(r->store))) return st;
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
    if ((st = modattn_store_put_document(r->store, &sd))) goto fail;
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
        st = modattn_store_put_chunk(r->store, sd.id, &ci, d->vecs + i * r->dim, r->dim);
        modattn_free(clean);
        if (st) goto fail;
    }
    if ((st = modattn_store_commit(r->store))) goto fail;
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "chunks=%zu", d->nchunks);
        modattn_trace_end(tr, "index.store", "sqlite", shape, 0, 0);
    }
    r->stats->files_indexed++;
    event(r, MODATTN_INDEX_INDEXED, d->path, "%zu chunks", d->nchunks);
    r->head = d->next;
    if (!r->head) r->tail = NULL;
    uint64_t size = (uint64_t)d->size;
    pdoc_free(d);
    r->files_done++;
    r->bytes_done += size;
    return 0;
fail:
    modattn_store_rollback(r->store);
    if ((st == MODATTN_EBUDGET || st == MODATTN_ENOMEM) && modattn_mem_last_status() == MODATTN_EBUDGET) {
        /* the memory budget ran out while writing this document (SQLite's pages count too): an
         * error for this file, rolled back whole; the run goes on */
        r->stats->files_skipped++;
        event(r, MODATTN_INDEX_ERROR, d->path, "over the memory budget (--mem-budget) while storing it: %s",
              modattn_last_error());
        r->head = d->next;
        if (!r->head) r->tail = NULL;
        uint64_t size = (uint64_t)d->size;
        pdoc_free(d);
        r->files_done++;
        r->bytes_done += size;
        return 0;
    }
    return st;
}

/* Embeds the next batch of queued chunks (across documents); writes the documents it completes. */
static int flush_batch(run *r) {
    size_t n = 0;
    int st = 0;
    for (pdoc *d = r->head; d && n < r->batch; d = d->next) {
        while (d->queued < d->nchunks && n < r->batch) {
            /* what is embedded is what is stored (chunk_text, again at write_doc) */
            const char *t;
            size_t len;
            if ((st = chunk_text(d, d->queued, &t, &len, &r->bclean[n]))) goto done;
            r->btexts[n] = t;
            r->blens[n] = len;
            r->bdoc[n] = d;
            r->bidx[n] = d->queued;
            d->queued++;
            n++;
        }
    }
    if (n == 0) return 0;
    r->unqueued -= n;
    /* with a cancel hook, in slices of a few chunks, asking it between them: a stop comes within
     * a fraction of a second, not a whole batch (the vectors are the same: a text's embedding does
     * not depend on what it is batched with) */
    const size_t step = r->opt->cancel ? CANCEL_SLICE : n;
    for (size_t o = 0; o < n; o += step) {
        if (o && cancelled(r)) goto done; /* the run stops: nothing of this batch is written */
        size_t k = n - o < step ? n - o : step;
        if ((st = modattn_model_embed(r->model, r->btexts + o, r->blens + o, k, r->bvec + o * r->dim, r->bntok + o))) {
            st = modattn_error_prefix(st, "embedding %s", r->bdoc[o]->path);
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        pdoc *d = r->bdoc[i];
        float *v = d->vecs + r->bidx[i] * r->dim;
        memcpy(v, r->bvec + i * r->dim, r->dim * sizeof(float));
        modattn_vec_normalize(v, r->dim);
        d->ntok[r->bidx[i]] = r->bntok[i];
        d->embedded++;
        r->stats->chunks_embedded++;
        r->stats->tokens_embedded += (uint64_t)r->bntok[i];
    }
    /* documents complete in queue order: write each in one short transaction */
    st = write_ready(r, false);
    if (!st) progress(r, false);
done:
    for (size_t i = 0; i < n; i++) {
        modattn_free(r->bclean[i]);
        r->bclean[i] = NULL;
    }
    if (st) modattn_store_rollback(r->store);
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
            int got = r->split->fetch(r->split->ud, d->path, d->hash, d->nchunks, r->dim, d->vecs, d->ntok, wait);
            if (got < 0) return got;
            if (got == 0) {
                if (wait) return modattn_error(MODATTN_EINVAL, "index: the vectors of %s did not come", d->path);
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
        char **nv = modattn_realloc(l->v, nc * sizeof *nv, MODATTN_MEM_OTHER);
        if (!nv) return l->st = modattn_mem_last_status();
        l->v = nv;
        l->cap = nc;
    }
    if (!(l->v[l->n] = modattn_strdup(path, MODATTN_MEM_OTHER)))
        return l->st = modattn_mem_last_status();
    l->n++;
    return 0;
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
    stored_id *ids = modattn_malloc((l->n ? l->n : 1) * sizeof *ids, MODATTN_MEM_OTHER);
    if (!ids) return modattn_mem_last_status();
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
    int st = modattn_store_each_path(r->store, collect_path, &l);
    if (!st) st = prune_same_files(r, &l);
    for (size_t i = 0; i < l.n && !st; i++) {
        struct stat sb;
        if (stat(l.v[i], &sb) == 0 && S_ISREG(sb.st_mode)) continue;
        if (stat(l.v[i], &sb) != 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
            continue; /* it may exist: don't drop what we cannot see */
        int k = modattn_store_delete_document(r->store, l.v[i]);
        if (k < 0) st = k;
        else if (k == 1) {
            r->stats->files_pruned++;
            event(r, MODATTN_INDEX_PRUNED, l.v[i], "the file no longer exists");
        }
    }
    for (size_t i = 0; i < l.n; i++) modattn_free(l.v[i]);
    modattn_free(l.v);
    return st;
}

/* ------------------------------------------------------------------ entry point */

int modattn_index_paths(modattn_store *store, modattn_model *model, const char *const *paths,
                        size_t npaths, const modattn_index_options *opt,
                        modattn_index_stats *stats) {
    return modattn_index_paths_split(store, model, paths, npaths, opt, NULL, stats);
}

int modattn_index_paths_split(modattn_store *store, modattn_model *model, const char *const *paths,
                              size_t npaths, const modattn_index_options *opt,
                              const modattn_index_split *split, modattn_index_stats *stats) {
    if (!stats) return modattn_error(MODATTN_EINVAL, "modattn_index_paths: stats is NULL");
    memset(stats, 0, sizeof *stats);
    const bool plan_mode = split && split->plan, emit_mode = split && split->emit,
               write_split = split && split->remote && split->fetch;
    if (split && (plan_mode + emit_mode + write_split != 1 || (!write_split && (split->remote || split->fetch))))
        return modattn_error(MODATTN_EINVAL, "modattn_index_paths_split: set exactly one of plan, emit or "
                                             "remote with fetch");
    if (emit_mode) store = NULL; /* the embed part reads no store and writes none */
    if ((!store && !emit_mode) || !model || (!paths && npaths))
        return modattn_error(MODATTN_EINVAL, "modattn_index_paths: NULL argument");
    modattn_index_options defaults;
    memset(&defaults, 0, sizeof defaults);
    defaults.overlap = -1;
    if (!opt) opt = &defaults;

    run r;
    memset(&r, 0, sizeof r);
    char *own[5] = {NULL, NULL, NULL, NULL, NULL};
    r.store = store;
    r.model = model;
    r.opt = opt;
    r.stats = stats;
    r.split = split;
    r.plan_mode = plan_mode;
    r.emit_mode = emit_mode;
    r.write_split = write_split;
    const modattn_model_info *info = modattn_model_get_info(model);
    r.dim = info->dim;
    int st = 0;
    r.tok = modattn_model_tokenizer(model);
    const size_t specials = modattn_tokenizer_num_specials(r.tok);
    size_t ct = opt->chunk_tokens ? opt->chunk_tokens : info->max_tokens;
    if (ct > info->max_tokens || ct <= specials) {
        st = modattn_error(MODATTN_EINVAL, "--chunk-tokens %zu: must be in [%zu, %zu] for model %s "
                           "(its max_seq_length is %zu, [CLS]/[SEP] included)", ct, specials + 1,
                           info->max_tokens, info->name, info->max_tokens);
        goto done;
    }
    r.chunk_tokens = (int32_t)ct;
    r.window = ct - specials;
    if (opt->overlap < 0) {
        r.overlap = MODATTN_INGEST_DEFAULT_OVERLAP;
        if (r.overlap > r.window / 4) r.overlap = r.window / 4;
    } else if ((size_t)opt->overlap >= r.window) {
        st = modattn_error(MODATTN_EINVAL, "--overlap %ld: must be smaller than the chunk's %zu "
                           "word pieces (--chunk-tokens %zu less %zu special tokens)",
                           opt->overlap, r.window, ct, specials);
        goto done;
    } else {
        r.overlap = (size_t)opt->overlap;
    }
    r.max_bytes = opt->max_file_bytes ? opt->max_file_bytes : MODATTN_INGEST_DEFAULT_MAX_FILE_BYTES;
    r.batch = opt->batch_chunks ? opt->batch_chunks : DEFAULT_BATCH_CHUNKS;
    if (r.batch > 65536) r.batch = 65536;
    r.xlim.timeout_s = opt->file_timeout_s > 0   ? opt->file_timeout_s
                       : opt->file_timeout_s == 0 ? MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S
                                                  : 0;
    r.xlim.max_text = r.max_bytes > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)r.max_bytes;
    r.xlim.cancel = extract_cancel;
    r.xlim.cancel_ud = &r;

    modattn_store_model sm = {info->name, info->weights_hash, info->dim, info->identity,
                             modattn_precision_name(info->precision)};
    if (store && (st = modattn_store_bind_model(store, &sm))) goto done;

    /* the store's own files are never indexed */
    own[0] = store ? modattn_path_absolute(modattn_store_path(store)) : NULL;
    if (own[0]) {
        static const char *const sfx[] = {"-wal", "-shm", "-journal", ".vec"};
        size_t n0 = strlen(own[0]);
        for (int i = 0; i < 4; i++) {
            own[i + 1] = modattn_malloc(n0 + 9, MODATTN_MEM_OTHER);
            if (own[i + 1]) snprintf(own[i + 1], n0 + 9, "%s%s", own[0], sfx[i]);
        }
    }
    for (int i = 0; i < 5; i++) r.skip_paths[i] = own[i];
    if (own[0]) {
        char *slash = strrchr(own[0], '/');
        struct stat db_dir;
        *slash = '\0';
        if (stat(own[0][0] ? own[0] : "/", &db_dir) == 0) {
            r.have_store_dir = true;
            r.store_dev = db_dir.st_dev;
            r.store_ino = db_dir.st_ino;
            r.store_base = slash + 1;
        }
        *slash = '/';
    }

    r.btexts = modattn_malloc(r.batch * sizeof *r.btexts, MODATTN_MEM_OTHER);
    r.blens = modattn_malloc(r.batch * sizeof *r.blens, MODATTN_MEM_OTHER);
    r.bclean = modattn_calloc(r.batch, sizeof *r.bclean, MODATTN_MEM_OTHER);
    r.bdoc = modattn_malloc(r.batch * sizeof *r.bdoc, MODATTN_MEM_OTHER);
    r.bidx = modattn_malloc(r.batch * sizeof *r.bidx, MODATTN_MEM_OTHER);
    r.bvec = modattn_malloc(r.batch * r.dim * sizeof(float), MODATTN_MEM_INDEX);
    r.bntok = modattn_malloc(r.batch * sizeof *r.bntok, MODATTN_MEM_OTHER);
    if (!r.btexts || !r.blens || !r.bclean || !r.bdoc || !r.bidx || !r.bvec || !r.bntok) {
        st = modattn_mem_last_status();
        goto free_own;
    }

    /* 1. walk */
    for (size_t i = 0; i < npaths && !st; i++) {
        char *abs = modattn_path_absolute(paths[i]);
        if (!abs) {
            st = modattn_mem_last_status();
            break;
        }
        st = walk(&r, abs, true);
        modattn_free(abs);
    }
    if (st) goto free_own;
    /* the same file under two names (a folder and a file in it, a link, a hard link) once */
    dedupe_files(&r);

    /* 2. index */
    r.t0_ns = modattn_now_ns();
    progress(&r, true);
    for (size_t i = 0; i < r.nfiles && !st && !cancelled(&r); i++) st = process_file(&r, &r.files[i]);
    while (!st && r.head && !cancelled(&r)) {
        if (r.unqueued) st = flush_batch(&r);
        else if (r.head->remote) st = write_ready(&r, true); /* a split write waits for the rest */
        else st = modattn_error(MODATTN_EINVAL, "index: %s is queued with nothing to embed", r.head->path);
    }
    if (!st) progress(&r, true);
    if (r.stop) { /* what is committed stays; the rest (the queue, prune, vector file) waits */
        stats->cancelled = true;
        goto free_own;
    }
    if (plan_mode || emit_mode) goto free_own; /* the parts that write nothing */

    /* 3. prune */
    if (!st && opt->prune) st = prune(&r);

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

free_own:
    if (store) modattn_store_rollback(store);
    while (r.head) {
        pdoc *n = r.head->next;
        pdoc_free(r.head);
        r.head = n;
    }
    for (size_t i = 0; i < r.nfiles; i++) modattn_free(r.files[i].path);
    modattn_free(r.files);
    modattn_free(r.dirs);
    if (r.bclean)
        for (size_t i = 0; i < r.batch; i++) modattn_free(r.bclean[i]);
    modattn_free(r.btexts);
    modattn_free(r.blens);
    modattn_free(r.bclean);
    modattn_free(r.bdoc);
    modattn_free(r.bidx);
    modattn_free(r.bvec);
    modattn_free(r.bntok);
    for (int i = 0; i < 5; i++) modattn_free(own[i]);
done:
    return st;
}
