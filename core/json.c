/* core/json.c — jansson's allocations through modattn's accounting, and JSON parsing that stays
 * safe when one of them fails.
 *
 * Blocks handed to jansson carry a 16-byte header (the size, a magic number), since jansson's
 * free function gets no size; 16 bytes keep malloc's alignment, which is all jansson needs.
 *
 * jansson 2.14 does not survive a NULL from its allocator: its lexer (lex_save) and its dumper
 * (an object's keys) ignore a failed growth of their string buffer and go on without the bytes,
 * so a refused allocation (budget, injected failure) is served anyway, counted, and recorded for
 * the thread. A parse here reads its input through a callback that ends the input as soon as a
 * refusal is recorded, so the parse stops, and reports it; other callers take it with
 * modattn__json_take_failure() (see core.h). */
#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "core/alloc_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JHDR 16u
#define JMAGIC 0x6a736f6eu /* "json" */

typedef struct jhdr {
    size_t size;
    uint32_t magic;
    uint32_t pad;
} jhdr;
_Static_assert(sizeof(jhdr) == JHDR, "header keeps malloc's 16-byte alignment");

/* Per thread: the first refused allocation not yet taken (modattn__json_take_failure, or a
 * guarded parse), and its message. */
static _Thread_local int tl_failed;
static _Thread_local char tl_msg[512];

static void *json_malloc_hook(size_t bytes) {
    const modattn_mem_category cat = MODATTN_MEM_OTHER;
    if (bytes > SIZE_MAX - JHDR) { /* not a size jansson asks for */
        modattn__mem_note_failure(MODATTN_ENOMEM);
        if (!tl_failed) {
            tl_failed = MODATTN_ENOMEM;
            snprintf(tl_msg, sizeof tl_msg, "allocation of %zu bytes for %s (jansson) is too large", bytes,
                     modattn_mem_category_name(cat));
        }
        return NULL;
    }
    /* budget and fault injection (the message is recorded); a refusal is served anyway, since
     * jansson 2.14 does not survive a NULL (see core.h), and recorded for the caller */
    int st = modattn__mem_reserve(cat, bytes);
    if (st != 0) {
        if (!tl_failed) {
            tl_failed = st;
            snprintf(tl_msg, sizeof tl_msg, "%s", modattn_last_error());
        }
        modattn__mem_reserve_forced(cat, bytes);
    }
    jhdr *h = malloc(JHDR + bytes);
    if (!h) {
        modattn__mem_release(cat, bytes);
        modattn__mem_note_failure(MODATTN_ENOMEM);
        if (!tl_failed) {
            tl_failed = MODATTN_ENOMEM;
            snprintf(tl_msg, sizeof tl_msg, "out of memory: allocation of %zu bytes for %s (jansson) failed",
                     bytes, modattn_mem_category_name(cat));
        }
        return NULL;
    }
    h->size = bytes;
    h->magic = JMAGIC;
    h->pad = 0;
    if (st == 0) modattn__mem_note_success();
    return (char *)h + JHDR;
}

static void json_free_hook(void *ptr) {
    if (!ptr) return;
    jhdr *h = (jhdr *)(void *)((char *)ptr - JHDR);
    if (h->magic != JMAGIC) {
        fprintf(stderr,
                "modattn: jansson freed %p, which modattn's allocator did not give it (was "
                "modattn__json_count_allocations() called while jansson objects were alive?)\n",
                ptr);
        abort();
    }
    h->magic = 0;
    modattn__mem_release(MODATTN_MEM_OTHER, h->size);
    free(h);
}

int modattn__json_count_allocations(void) {
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    if (m == json_malloc_hook && f == json_free_hook) return 0;
    if (m != malloc || f != free)
        return modattn__error(MODATTN_EINVAL,
                             "modattn__json_count_allocations: jansson already uses allocation "
                             "functions installed by other code (json_set_alloc_funcs); left as they are");
    json_set_alloc_funcs(json_malloc_hook, json_free_hook);
    return 0;
}

bool modattn__json_allocations_counted(void) {
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    return m == json_malloc_hook && f == json_free_hook;
}

int modattn__json_take_failure(void) {
    int st = tl_failed;
    tl_failed = 0;
    if (st) modattn__error(st, "%s", tl_msg);
    return st;
}

void modattn__json_free(void *ptr) {
    if (!ptr) return;
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    f(ptr);
}

/* ---------------------------------------------------------------- guarded parsing */

typedef struct json_src {
    FILE *file;       /* or a buffer: */
    const char *buf;
    size_t len, pos;
    int read_errno;   /* fread failed */
} json_src;

/* jansson pulls its input through this in blocks of up to 1 KiB. Returning 0 ends the input. */
static size_t feed(void *buffer, size_t buflen, void *data) {
    json_src *s = data;
    if (tl_failed) return 0; /* an allocation failed: end the parse here */
    if (s->file) {
        errno = 0;
        size_t n = fread(buffer, 1, buflen, s->file);
        if (n == 0 && ferror(s->file)) {
            s->read_errno = errno ? errno : EIO;
            return (size_t)-1;
        }
        return n;
    }
    size_t n = s->len - s->pos < buflen ? s->len - s->pos : buflen;
    if (n == 0) return 0;
    memcpy(buffer, s->buf + s->pos, n);
    s->pos += n;
    return n;
}

static void set_err(json_error_t *err, enum json_error_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void set_err(json_error_t *err, enum json_error_code code, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    err->text[sizeof err->text - 1] = (char)code; /* where json_error_code() reads it */
}

static int parse(json_src *s, const char *shown, size_t flags, json_t **out, json_error_t *err) {
    json_error_t local;
    if (!err) err = &local;
    /* a refusal the caller has not taken yet stays theirs */
    int outer = tl_failed;
    char outer_msg[sizeof tl_msg];
    if (outer) memcpy(outer_msg, tl_msg, sizeof tl_msg);
    tl_failed = 0;
    json_t *j = json_load_callback(feed, s, flags, err);
    int failed = tl_failed;
    if (failed) modattn__error(failed, "%s", tl_msg);
    tl_failed = outer;
    if (outer) memcpy(tl_msg, outer_msg, sizeof tl_msg);
    snprintf(err->source, sizeof err->source, "%s", shown);
    if (failed) {
        json_decref(j); /* a result after a failed allocation is not to be trusted */
        set_err(err, json_error_out_of_memory, "out of memory");
        return failed;
    }
    if (s->read_errno) {
        json_decref(j);
        set_err(err, json_error_cannot_open_file, "read error: %s", strerror(s->read_errno));
        return modattn__error(MODATTN_EIO, "%s: read error: %s", shown, strerror(s->read_errno));
    }
    if (!j) {
        return modattn__error(MODATTN_EFORMAT, "line %d, column %d: %s", err->line, err->column,
                             err->text);
    }
    *out = j;
    return 0;
}

int modattn__json_load_file(const char *path, size_t flags, json_t **out, json_error_t *err) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn__json_load_file: out is NULL");
    *out = NULL;
    if (err) memset(err, 0, sizeof *err);
    if (!path) return modattn__error(MODATTN_EINVAL, "modattn__json_load_file: path is NULL");
    json_src s = {0};
    /* O_NONBLOCK, then only a regular file: a FIFO in a model folder must not hang the load */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        close(fd);
        if (err) {
            err->line = err->column = -1;
            snprintf(err->source, sizeof err->source, "%s", path);
            set_err(err, json_error_cannot_open_file, "%s is not a regular file", path);
        }
        return modattn__error(MODATTN_EIO, "%s: not a regular file", path);
    }
    s.file = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!s.file) {
        int e = errno;
        if (fd >= 0) close(fd);
        if (err) {
            err->line = err->column = -1;
            snprintf(err->source, sizeof err->source, "%s", path);
            set_err(err, json_error_cannot_open_file, "unable to open %s: %s", path, strerror(e));
        }
        return modattn__error(MODATTN_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    int st = parse(&s, path, flags, out, err);
    fclose(s.file);
    return st;
}

int modattn__json_loadb(const char *buf, size_t len, size_t flags, json_t **out, json_error_t *err) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn__json_loadb: out is NULL");
    *out = NULL;
    if (err) memset(err, 0, sizeof *err);
    if (!buf && len) return modattn__error(MODATTN_EINVAL, "modattn__json_loadb: buf is NULL");
    json_src s = {0};
    s.buf = buf;
    s.len = len;
    return parse(&s, "<buffer>", flags, out, err);
}
