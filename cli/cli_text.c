/* cli/cli_text.c — text that leaves the process: names and document text made safe for a
 * terminal, file names made valid JSON without losing a byte, and the check that what was
 * written to standard output really got there (with the reason when it did not); and text that
 * comes in: input lines read with a bound. */
#define _GNU_SOURCE
#include "cli/cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/ingest.h"
#include "core/internal_core.h"
#include "pipeline/internal_ingest.h"

/* Length of the well-formed UTF-8 sequence at p (of at most n bytes), 0 if it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
    size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    return modattn__utf8_valid((const char *)p, len) ? len : 0;
}

const char *cli_term_text(const char *s, char *buf, size_t cap) {
    if (!s) return "(null)";
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n && o + 8 < cap;) {
        size_t len = utf8_seq(p + i, n - i);
        /* C0 controls, DEL, C1 controls (U+0080..U+009F) and stray bytes: \xHH for each byte */
        bool esc = len == 0 || (len == 1 && (p[i] < 0x20 || p[i] == 0x7f)) || (len == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0);
        if (!esc) {
            memcpy(buf + o, p + i, len);
            o += len, i += len;
            continue;
        }
        size_t k = len ? len : 1;
        for (size_t j = 0; j < k && o + 8 < cap; j++) {
            buf[o++] = '\\', buf[o++] = 'x';
            buf[o++] = hex[p[i + j] >> 4], buf[o++] = hex[p[i + j] & 15];
        }
        i += k;
    }
    buf[o] = '\0';
    return buf;
}

int cli_json_set_path(json_t *obj, const char *key, const char *path) {
    const size_t n = strlen(path);
    if (modattn__utf8_valid(path, n)) return json_object_set_new(obj, key, json_stringn(path, n));
    size_t m = 0;
    char *shown = modattn__utf8_sanitize(path, n, &m);
    char *hexs = malloc(2 * n + 1);
    int r = -1;
    if (shown && hexs) {
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
            hexs[2 * i] = hex[(unsigned char)path[i] >> 4];
            hexs[2 * i + 1] = hex[(unsigned char)path[i] & 15];
        }
        hexs[2 * n] = '\0';
        char bkey[64];
        snprintf(bkey, sizeof bkey, "%s_bytes", key);
        r = json_object_set_new(obj, key, json_stringn(shown, m));
        if (!r) r = json_object_set_new(obj, bkey, json_string(hexs));
    }
    modattn_free(shown);
    free(hexs);
    return r;
}

json_t *cli_json_text(const char *s) {
    const size_t n = s ? strlen(s) : 0;
    if (!s || modattn__utf8_valid(s, n)) return json_stringn(s ? s : "", n);
    size_t m = 0;
    char *t = modattn__utf8_sanitize(s, n, &m);
    json_t *j = t ? json_stringn(t, m) : NULL;
    modattn_free(t);
    return j;
}

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cli_fail(const char *what, int status) {
    const char *msg = modattn_last_error();
    char safe[4096];
    fprintf(stderr, "modattn: %s: %s\n", what, cli_term_text(msg && *msg ? msg : modattn_strerror(status), safe, sizeof safe));
    return 1;
}

int cli_print_json(json_t *j) {
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    /* a refused allocation while building or writing the JSON (--mem-budget): not printed */
    if (modattn__json_take_failure() != 0 || !s) {
        modattn__json_free(s);
        return cli_json_fail("writing JSON");
    }
    puts(s);
    modattn__json_free(s);
    return 0;
}

int cli_json_fail(const char *what) {
    if (modattn__json_take_failure() != 0) return cli_fail(what, MODATTN_ENOMEM);
    fprintf(stderr, "modattn: %s: the output could not be encoded as JSON\n", what);
    return 1;
}

/* stdout is a pipe or socket whose reader has gone (an earlier write failed with EPIPE). */
static bool reader_gone(void) {
    struct stat st;
    if (fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

/* The first error a write to standard output met: stdio keeps only a flag, and errno is long gone
 * by the time the output is checked, so stdout writes through this recorder (cli_stdout_init). */
static int g_out_errno;

static ssize_t out_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(STDOUT_FILENO, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!g_out_errno) g_out_errno = w < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

void cli_stdout_init(void) {
    cookie_io_functions_t io = {.read = NULL, .write = out_write, .seek = NULL, .close = NULL};
    FILE *o = fopencookie(NULL, "w", io);
    if (!o) return; /* the plain stdout: a failure then says less, nothing else changes */
    setvbuf(o, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, (size_t)64 << 10);
    stdout = o;
}

int cli_stdout_check(void) {
    static bool reported;
    errno = 0;
    const int flushed = fflush(stdout);
    const int err = g_out_errno ? g_out_errno : errno;
    if (flushed == 0 && !ferror(stdout)) return 0;
    /* said once; a reader that went away: quiet, as SIGPIPE would be */
    if (reported || err == EPIPE || reader_gone()) return 1;
    reported = true;
    if (err)
        fprintf(stderr, "modattn: writing the output (standard output) failed: %s; the output is incomplete\n",
                strerror(err));
    else
        fprintf(stderr, "modattn: writing the output (standard output) failed: the output is incomplete\n");
    return 1;
}

int cli_finish_stdout(int rc) { return cli_stdout_check() && !rc ? 1 : rc; }

int cli_read_line(FILE *f, char **buf, size_t *cap, size_t *len, size_t max) {
    size_t n = 0;
    int c = EOF;
    errno = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        if (n == max) {
            ungetc(c, f);
            *len = n;
            return -1;
        }
        if (n + 2 > *cap) { /* room for this byte and the NUL */
            size_t nc = *cap ? 2 * *cap : 4096;
            if (nc > max + 2) nc = max + 2;
            char *nb = modattn__realloc(*buf, nc, MODATTN_MEM_OTHER);
            if (!nb) {
                *len = n;
                return -2;
            }
            *buf = nb, *cap = nc;
        }
        (*buf)[n++] = (char)c;
        if (c == '\n') break;
    }
    *len = n;
    if (*buf) (*buf)[n] = '\0';
    if (c == EOF && ferror(f)) return -3;
    return n > 0 ? 1 : 0;
}

void cli_line_error(const char *cmd, const char *what, size_t lineno, int r) {
    if (r == -1)
        fprintf(stderr, "modattn: %s: %s line %zu is longer than %zu MiB, the most a line may hold; nothing "
                "after it was read\n", cmd, what, lineno, CLI_MAX_LINE >> 20);
    else if (r == -2)
        fprintf(stderr, "modattn: %s: %s line %zu: %s\n", cmd, what, lineno, modattn_last_error());
    else
        fprintf(stderr, "modattn: %s: reading %s (line %zu): %s\n", cmd, what, lineno, strerror(errno ? errno : EIO));
}
