/* pipeline/extract.c — HTML and PDF text extraction in a child process, under a memory limit and a
 * time limit (the indexer's extractors: modattn__extract_isolated). Issue 40's formats (DOCX, PPTX,
 * XLSX, OpenDocument, EPUB, RTF, Word 97-2003 .doc, e-mail, compressed text: pipeline/fmt_*.c)
 * run the same way, dispatched by kind (modattn__fmt_extract); their decompressed bytes are capped at max_text too.
 *
 * Why a process. libxml2 and poppler allocate with plain malloc/new, out of sight of
 * modattn__malloc's budget, and neither can be stopped part way: a PDF whose one FlateDecode stream
 * expands to 400 MB (poppler keeps every word of it) or an HTML element with 300,000 attributes
 * (quadratic in libxml2) cost gigabytes or minutes whatever --mem-budget says. A forked child
 * runs the extractor alone: setrlimit(RLIMIT_DATA) caps what it may map beyond what it inherited
 * (the allocators then fail, and libxml2 fails cleanly, poppler and glib abort), and the parent
 * SIGKILLs it past the time limit. Whatever happens in there (a crash included) is the child's:
 * the parent sees a reason, and the file is skipped with it.
 *
 * The child runs the same in-process extractors (modattn_extract_html/pdf) and sends their result
 * down a pipe: a header, the extractor's message, the text, the marks; so what is indexed is bit
 * for bit what the in-process call gives. The parent reads it into blocks from modattn__malloc
 * (counted, MODATTN_MEM_OTHER, refused past the budget), the text at most max_text bytes. The
 * child's stderr goes through the parent (relayed as it comes), whose last bytes tell an
 * allocator's abort ("Out of memory", std::bad_alloc, glib's "failed to allocate") from a crash.
 *
 * fork() in a threaded process: the child only calls the extractor (glibc makes malloc usable
 * after fork), writes, and _exit()s, so it runs no atexit handler, flushes no stdio buffer and
 * closes no SQLite connection of the parent's. If it ever deadlocked on a lock another thread held
 * at the fork, the time limit ends it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <libxml/parser.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/fmt_internal.h"

/* what the child sends first */
typedef struct wire_head {
    int32_t status;   /* the extractor's return */
    int32_t pages;
    uint64_t len;     /* text bytes */
    uint64_t nmarks;
    uint32_t msglen;  /* the extractor's message (status != 0) */
    uint32_t xml_oom; /* libxml2 could not allocate (its result would be partial) */
} wire_head;

/* ------------------------------------------------------------------ the child */

static volatile int g_child_xml_oom;
static void *xml_malloc_hook(size_t n) {
    void *p = malloc(n);
    if (!p) g_child_xml_oom = 1;
    return p;
}
static void *xml_realloc_hook(void *q, size_t n) {
    void *p = realloc(q, n);
    if (!p && n) g_child_xml_oom = 1;
    return p;
}
static char *xml_strdup_hook(const char *s) {
    char *p = strdup(s);
    if (!p) g_child_xml_oom = 1;
    return p;
}

static bool write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n > (1u << 20) ? (1u << 20) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        c += k;
        n -= (size_t)k;
    }
    return true;
}

/* VmData of this process in bytes (0 if unknown). */
static uint64_t vm_data(void) {
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strstr(buf, "\nVmData:");
    if (!p) return 0;
    return strtoull(p + 8, NULL, 10) * 1024;
}

/* ------------------------------------------------------------------ dispatch by kind */

bool modattn__kind_extracted(modattn_doc_kind kind) {
    switch (kind) {
    case MODATTN_DOC_BINARY:
    case MODATTN_DOC_TEXT:
    case MODATTN_DOC_MARKDOWN: return false;
    default: return true;
    }
}

int modattn__fmt_extract(modattn_doc_kind kind, const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    switch (kind) {
    case MODATTN_DOC_HTML: return modattn_extract_html(buf, len, out);
    case MODATTN_DOC_PDF: return modattn_extract_pdf(buf, len, out);
    case MODATTN_DOC_DOCX: return modattn__extract_docx(buf, len, cap, out);
    case MODATTN_DOC_PPTX: return modattn__extract_pptx(buf, len, cap, out);
    case MODATTN_DOC_XLSX: return modattn__extract_xlsx(buf, len, cap, out);
    case MODATTN_DOC_ODT:
    case MODATTN_DOC_ODP:
    case MODATTN_DOC_ODS: return modattn__extract_odf(buf, len, cap, out);
    case MODATTN_DOC_EPUB: return modattn__extract_epub(buf, len, cap, out);
    case MODATTN_DOC_RTF: return modattn__extract_rtf(buf, len, cap, out);
    case MODATTN_DOC_EMAIL: return modattn__extract_mail(buf, len, cap, false, out);
    case MODATTN_DOC_MBOX: return modattn__extract_mail(buf, len, cap, true, out);
    case MODATTN_DOC_COMPRESSED: return modattn__extract_compressed(buf, len, cap, out);
    case MODATTN_DOC_DOC: return modattn__extract_doc(buf, len, cap, out);
    default: return modattn__error(MODATTN_EINVAL, "no extractor for %s files", modattn_doc_kind_name(kind));
    }
}

/* What a message calls the kind's library ("the DOCX library crashed"). */
static const char *kind_what(modattn_doc_kind kind) {
    switch (kind) {
    case MODATTN_DOC_HTML: return "HTML";
    case MODATTN_DOC_PDF: return "PDF";
    case MODATTN_DOC_DOCX: return "DOCX";
    case MODATTN_DOC_PPTX: return "PPTX";
    case MODATTN_DOC_XLSX: return "XLSX";
    case MODATTN_DOC_ODT: return "ODT";
    case MODATTN_DOC_ODP: return "ODP";
    case MODATTN_DOC_ODS: return "ODS";
    case MODATTN_DOC_EPUB: return "EPUB";
    case MODATTN_DOC_RTF: return "RTF";
    case MODATTN_DOC_EMAIL: return "e-mail";
    case MODATTN_DOC_MBOX: return "mailbox";
    case MODATTN_DOC_COMPRESSED: return "decompression";
    case MODATTN_DOC_DOC: return "Word 97-2003";
    default: return "extraction";
    }
}

static bool kind_uses_xml(modattn_doc_kind kind) {
    return kind != MODATTN_DOC_PDF && kind != MODATTN_DOC_RTF && kind != MODATTN_DOC_COMPRESSED &&
           kind != MODATTN_DOC_DOC;
}

/* The child's start, for an extractor and for a walker alike: signals as by default (faults keep
 * their handlers), Ctrl-C left to the parent, killed with it, stderr to err_fd, no core file, and
 * RLIMIT_DATA at what it inherited plus mem. */
static void child_setup(uint64_t mem, int err_fd) {
    /* signals: the parent decides (it kills this process); faults keep their handlers (a
     * sanitizer's report); the rest as by default, all unblocked */
    static const int keep[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGKILL, SIGSTOP};
    for (int s = 1; s < 32; s++) {
        bool k = false;
        for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) k |= keep[i] == s;
        if (!k) signal(s, SIG_DFL);
    }
    signal(SIGINT, SIG_IGN); /* Ctrl-C reaches the whole process group: the parent answers it */
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (err_fd >= 0 && err_fd != STDERR_FILENO) {
        dup2(err_fd, STDERR_FILENO);
        close(err_fd);
    }
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    uint64_t base = vm_data();
    if (base && mem) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)(base + mem);
        struct rlimit old;
        if (getrlimit(RLIMIT_DATA, &old) == 0 && (old.rlim_max == RLIM_INFINITY || old.rlim_max > rl.rlim_max))
            setrlimit(RLIMIT_DATA, &rl);
    }
}

static _Noreturn void child_main(modattn_doc_kind kind, const char *buf, size_t len, uint64_t mem, size_t cap,
                                 int out_fd, int err_fd) {
    child_setup(mem, err_fd);
    if (kind_uses_xml(kind)) xmlMemSetup(free, xml_malloc_hook, xml_realloc_hook, xml_strdup_hook);
    modattn_doc_text d;
    memset(&d, 0, sizeof d);
    int st = modattn__fmt_extract(kind, buf, len, cap, &d);
    wire_head h;
    memset(&h, 0, sizeof h);
    h.status = st;
    h.xml_oom = (uint32_t)g_child_xml_oom;
    const char *msg = st ? modattn_last_error() : "";
    size_t ml = strlen(msg);
    if (ml > 1000) ml = 1000;
    h.msglen = (uint32_t)ml;
    if (!st) {
        h.pages = d.pages;
        h.len = d.len;
        h.nmarks = d.nmarks;
    }
    bool ok = write_all(out_fd, &h, sizeof h) && write_all(out_fd, msg, ml);
    if (ok && !st) ok = write_all(out_fd, d.text, d.len) && write_all(out_fd, d.marks, d.nmarks * sizeof *d.marks);
    _exit(ok ? 0 : 120);
}

/* ------------------------------------------------------------------ the parent */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* reading the child's answer, piece by piece as it comes */
typedef struct reader {
    wire_head h;
    size_t got_head, got_msg, got_text, got_marks;
    char msg[1001];
    char *text;                /* modattn__malloc'd */
    modattn_text_mark *marks;  /* modattn__malloc'd */
    size_t max_text;
    int st;                    /* first failure: a protocol error, the text too long, our budget */
    char why[400];
    bool done;                 /* everything announced was read (set at the end) */
} reader;

/* Copies what fits of [p, p+n) into the current part; returns the bytes used. */
static size_t take(reader *r, const char *p, size_t n) {
    if (r->got_head < sizeof r->h) {
        size_t k = sizeof r->h - r->got_head;
        if (k > n) k = n;
        memcpy((char *)&r->h + r->got_head, p, k);
        r->got_head += k;
        if (r->got_head == sizeof r->h) {
            if (r->h.msglen > 1000) {
                r->st = MODATTN_EINTERNAL;
                snprintf(r->why, sizeof r->why, "the extraction process sent a damaged answer");
                return n;
            }
            if (r->h.status == 0) {
                if (r->h.len > r->max_text) {
                    r->st = MODATTN_ERANGE;
                    snprintf(r->why, sizeof r->why,
                             "its text (%llu bytes) is over the cap of %llu bytes for extracted text "
                             "(--max-file-size)",
                             (unsigned long long)r->h.len, (unsigned long long)r->max_text);
                    return n;
                }
                if (r->h.nmarks > r->h.len + 1) {
                    r->st = MODATTN_EINTERNAL;
                    snprintf(r->why, sizeof r->why, "the extraction process sent a damaged answer");
                    return n;
                }
                r->text = modattn__malloc((size_t)r->h.len + 1, MODATTN_MEM_OTHER);
                r->marks = r->h.nmarks ? modattn__malloc((size_t)r->h.nmarks * sizeof *r->marks, MODATTN_MEM_OTHER)
                                       : NULL;
                if (!r->text || (r->h.nmarks && !r->marks)) {
                    r->st = modattn__mem_last_status();
                    snprintf(r->why, sizeof r->why, "%s", modattn_last_error());
                    return n;
                }
            }
        }
        return k;
    }
    if (r->got_msg < r->h.msglen) {
        size_t k = r->h.msglen - r->got_msg;
        if (k > n) k = n;
        memcpy(r->msg + r->got_msg, p, k);
        r->got_msg += k;
        r->msg[r->got_msg] = '\0';
        return k;
    }
    if (r->h.status) return n; /* nothing follows an error */
    if (r->got_text < r->h.len) {
        size_t k = (size_t)r->h.len - r->got_text;
        if (k > n) k = n;
        memcpy(r->text + r->got_text, p, k);
        r->got_text += k;
        return k;
    }
    size_t mb = (size_t)r->h.nmarks * sizeof *r->marks;
    if (r->got_marks < mb) {
        size_t k = mb - r->got_marks;
        if (k > n) k = n;
        memcpy((char *)r->marks + r->got_marks, p, k);
        r->got_marks += k;
        return k;
    }
    return n; /* more than announced: ignored */
}

static bool tail_says_oom(const char *tail) {
    /* poppler's gmem, libstdc++'s terminate, glib's g_malloc, sanitizers' allocators */
    static const char *const pats[] = {"ut of memory", "bad_alloc", "failed to allocate", "allocation failed",
                                       "Cannot allocate memory", "out-of-memory", "Failed to mmap",
                                       "exceeds maximum supported size", NULL};
    for (int i = 0; pats[i]; i++)
        if (strstr(tail, pats[i])) return true;
    return false;
}

/* The child's stderr, passed on as it comes; its last bytes kept (what an allocator's abort said). */
typedef struct errtail {
    char b[512];
    size_t n;
} errtail;
static void relay_stderr(errtail *t, const char *chunk, size_t n) {
    ssize_t w = write(STDERR_FILENO, chunk, n);
    (void)w;
    size_t keep = n < sizeof t->b - 1 ? n : sizeof t->b - 1;
    if (t->n + keep > sizeof t->b - 1) {
        size_t drop = t->n + keep - (sizeof t->b - 1);
        memmove(t->b, t->b + drop, t->n - drop);
        t->n -= drop;
    }
    memcpy(t->b + t->n, chunk + n - keep, keep);
    t->n += keep;
    t->b[t->n] = '\0';
}

static int timeout_error(const char *what, const modattn__extract_limits *lim) {
    return modattn__error(MODATTN_ERANGE, "took longer than --file-timeout %g s (the %s extraction was stopped)",
                          lim->timeout_s, what);
}

static int oom_error(const char *what, const modattn__extract_limits *lim) {
    /* an allocator refused (the limit set in the child): libxml2 says so, poppler and glib abort,
     * a sanitizer's allocator reports it and exits */
    return modattn__error(MODATTN_ERANGE,
                          "extraction exceeded the memory budget (the %s library may use %llu MiB: what "
                          "--mem-budget leaves, else 1 GiB)",
                          what, (unsigned long long)(lim->mem_bytes >> 20));
}

/* Why a child that gave no complete answer ended (ws from waitpid; killed: by us): an allocator
 * refused, a signal, an exit status. The error set, MODATTN_ERANGE. */
static int child_ended(const char *what, int ws, bool killed, const char *tail, double secs,
                       const modattn__extract_limits *lim) {
    if (!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) && tail_says_oom(tail)) return oom_error(what, lim);
    if (WIFSIGNALED(ws)) {
        int sig = WTERMSIG(ws);
        if (sig == SIGKILL && !killed)
            return modattn__error(MODATTN_ERANGE, "the %s extraction process was killed (signal 9: by the system, "
                                  "out of memory?) after %.1f s", what, secs);
        return modattn__error(MODATTN_ERANGE, "the %s library crashed (signal %d, %s) after %.1f s", what, sig,
                              strsignal(sig), secs);
    }
    return modattn__error(MODATTN_ERANGE, "the %s extraction process failed (exit status %d)", what,
                          WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

/* gcc 12's AddressSanitizer has no fork handler: a child forked while another thread is inside
 * its allocator inherits that lock held, whether the lock sleeps or yields (the stall watch below
 * sees both and forks again; a pure busy loop it would not see). In such builds the indexer's embedding thread holds g_fork_guard while
 * it embeds (modattn__fork_guard_enter/leave) and a fork waits for it, which is what newer ASan's
 * own handler does (it locks the allocator around fork). Elsewhere both are nothing: glibc's
 * malloc is safe across fork. */
#if defined(__SANITIZE_ADDRESS__)
#define FORK_GUARD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORK_GUARD 1
#endif
#endif
#ifdef FORK_GUARD
static pthread_mutex_t g_fork_guard = PTHREAD_MUTEX_INITIALIZER;
void modattn__fork_guard_enter(void) { pthread_mutex_lock(&g_fork_guard); }
void modattn__fork_guard_leave(void) { pthread_mutex_unlock(&g_fork_guard); }
static pid_t guarded_fork(void) {
    pthread_mutex_lock(&g_fork_guard);
    pid_t pid = fork();
    if (pid != 0) pthread_mutex_unlock(&g_fork_guard); /* the child never uses it */
    return pid;
}
#else
void modattn__fork_guard_enter(void) {}
void modattn__fork_guard_leave(void) {}
static pid_t guarded_fork(void) { return fork(); }
#endif

/* The child's state and its user and system CPU ticks from /proc/PID/stat (the child has one
 * thread); false where that cannot be read. */
static bool child_sample(pid_t pid, char *state, unsigned long long *user, unsigned long long *sys) {
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char b[1024];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0) return false;
    b[n] = '\0';
    const char *p = strrchr(b, ')'); /* the name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2]) return false;
    *state = p[2];
    unsigned long long ut = 0, stt = 0; /* after the state: ppid pgrp session tty tpgid flags 4 fault counts */
    if (sscanf(p + 3, " %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) != 2) return false;
    *user = ut, *sys = stt;
    return true;
}

double modattn__extract_stall_s = MODATTN__EXTRACT_STALL_S;
void (*modattn__extract_child_hook)(void) = NULL;

static int extract_once(modattn_doc_kind kind, const char *buf, size_t len, const modattn__extract_limits *lim,
                        modattn_doc_text *out, bool *cancelled, bool *stalled) {
    memset(out, 0, sizeof *out);
    if (cancelled) *cancelled = false;
    if (!modattn__kind_extracted(kind))
        return modattn__error(MODATTN_EINVAL, "modattn__extract_isolated: %s files have no extractor",
                             modattn_doc_kind_name(kind));
    const char *what = kind_what(kind);
    if (kind_uses_xml(kind)) xmlInitParser(); /* in the parent, once, not in every child */
    int dp[2], ep[2] = {-1, -1};
    if (pipe2(dp, O_CLOEXEC) != 0)
        return modattn__error(MODATTN_EIO, "cannot start the %s extraction process: %s", what, strerror(errno));
    if (pipe2(ep, O_CLOEXEC) != 0) ep[0] = ep[1] = -1; /* then the child's stderr is ours */
    fflush(stderr);
    pid_t pid = guarded_fork();
    if (pid < 0) {
        int e = errno;
        close(dp[0]);
        close(dp[1]);
        if (ep[0] >= 0) close(ep[0]), close(ep[1]);
        return modattn__error(MODATTN_EIO, "cannot start the %s extraction process: %s", what, strerror(e));
    }
    if (pid == 0) {
        close(dp[0]);
        if (ep[0] >= 0) close(ep[0]);
        if (modattn__extract_child_hook) modattn__extract_child_hook(); /* tests: a lock held at the fork */
        child_main(kind, buf, len, lim->mem_bytes, lim->max_text ? lim->max_text : SIZE_MAX / 2, dp[1], ep[1]);
    }
    close(dp[1]);
    if (ep[1] >= 0) close(ep[1]);
    fcntl(dp[0], F_SETFL, fcntl(dp[0], F_GETFL) | O_NONBLOCK);
    if (ep[0] >= 0) fcntl(ep[0], F_SETFL, fcntl(ep[0], F_GETFL) | O_NONBLOCK);

    reader r;
    memset(&r, 0, sizeof r);
    r.max_text = lim->max_text;
    errtail tail = {"", 0};
    const uint64_t t0 = now_ns();
    uint64_t last_ask = 0;
    const uint64_t limit_ns = lim->timeout_s > 0 ? (uint64_t)(lim->timeout_s * 1e9) : 0;
    bool timed_out = false, killed = false, data_eof = false, err_eof = ep[0] < 0;
    char chunk[65536];
    /* the stall watch, for modattn__extract_stall_s: asleep ('S') with no CPU tick since the last
     * look (a lock that sleeps), or spinning in the kernel (a lock that yields: AddressSanitizer's
     * spin locks call sched_yield) — nothing sent, at least 3 system ticks for each 2 user ticks
     * and a tenth of the time on a CPU. An extractor computes in user space and never reads a file
     * (its input is in memory): its system time is page faults, a small share of its user time. A
     * sched_yield loop's share of system time depends on the kernel: 4x its user time or more on
     * 6.1, 2.3x on 6.18 (measured: 50 user and 115 system ticks in 2 s), where a bound of 4x
     * missed every spinning child and left it to --file-timeout. */
    const uint64_t stall_ns = modattn__extract_stall_s > 0 ? (uint64_t)(modattn__extract_stall_s * 1e9) : 0;
    const double hz = (double)sysconf(_SC_CLK_TCK);
    uint64_t last_look = t0, asleep_since = 0, spin_since = 0;
    unsigned long long last_ticks = ~0ull, spin_user = 0, spin_sys = 0;
    size_t got = 0, spin_got = 0; /* bytes read from the child */
    double spun_user = 0, spun_sys = 0;
    while (!data_eof || !err_eof) {
        if (r.st && !killed) { /* nothing more is wanted from it */
            kill(pid, SIGKILL);
            killed = true;
        }
        if (lim->cancel && !killed && now_ns() - last_ask >= 50000000ull) { /* every 50 ms at most */
            last_ask = now_ns();
            if (lim->cancel(lim->cancel_ud)) {
                if (cancelled) *cancelled = true;
                kill(pid, SIGKILL);
                killed = true;
            }
        }
        if (stall_ns && !killed && now_ns() - last_look >= 250000000ull) { /* every 250 ms */
            last_look = now_ns();
            char state = 0;
            unsigned long long user = 0, sys = 0;
            const bool seen = child_sample(pid, &state, &user, &sys);
            const unsigned long long ticks = user + sys;
            if (seen && state == 'S' && ticks == last_ticks) {
                if (!asleep_since) asleep_since = last_look;
                else if (last_look - asleep_since >= stall_ns) {
                    *stalled = true;
                    kill(pid, SIGKILL);
                    killed = true;
                }
            } else {
                asleep_since = 0;
            }
            last_ticks = ticks;
            if (!seen || !spin_since || got != spin_got || user < spin_user || sys < spin_sys) {
                spin_since = last_look, spin_user = user, spin_sys = sys, spin_got = got;
            } else if (!killed && last_look - spin_since >= stall_ns) {
                const double du = (double)(user - spin_user), ds = (double)(sys - spin_sys);
                if (2 * ds >= 3 * du && ds >= 0.1 * (double)(last_look - spin_since) * 1e-9 * hz) {
                    *stalled = true;
                    spun_user = du / hz, spun_sys = ds / hz;
                    kill(pid, SIGKILL);
                    killed = true;
                } else {
                    spin_since = last_look, spin_user = user, spin_sys = sys;
                }
            }
        }
        int wait_ms = 100;
        if (limit_ns && !killed) {
            uint64_t el = now_ns() - t0;
            if (el >= limit_ns) {
                timed_out = true;
                kill(pid, SIGKILL);
                killed = true;
            } else if ((limit_ns - el) / 1000000 < (uint64_t)wait_ms) {
                wait_ms = (int)((limit_ns - el) / 1000000) + 1;
            }
        }
        struct pollfd pf[2];
        int np = 0;
        if (!data_eof) pf[np++] = (struct pollfd){dp[0], POLLIN, 0};
        if (!err_eof) pf[np++] = (struct pollfd){ep[0], POLLIN, 0};
        int k = poll(pf, (nfds_t)np, wait_ms);
        if (k < 0 && errno != EINTR) break;
        if (k <= 0) continue;
        for (int i = 0; i < np; i++) {
            if (!pf[i].revents) continue;
            ssize_t n = read(pf[i].fd, chunk, sizeof chunk);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) {
                if (pf[i].fd == dp[0]) data_eof = true;
                else err_eof = true;
                continue;
            }
            if (pf[i].fd == dp[0]) {
                got += (size_t)n;
                size_t o = 0;
                while (o < (size_t)n && !r.st) o += take(&r, chunk + o, (size_t)n - o);
            } else {
                relay_stderr(&tail, chunk, (size_t)n); /* the extractor's own messages */
            }
        }
    }
    close(dp[0]);
    if (ep[0] >= 0) close(ep[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    const double secs = (double)(now_ns() - t0) * 1e-9;
    r.done = !r.st && r.got_head == sizeof r.h && r.got_msg == r.h.msglen &&
             (r.h.status || (r.got_text == r.h.len && r.got_marks == r.h.nmarks * sizeof *r.marks));

    int st = 0;
    if (cancelled && *cancelled) {
        st = modattn__error(MODATTN_ERANGE, "interrupted");
    } else if (*stalled && spin_since && (spun_user > 0 || spun_sys > 0)) {
        st = modattn__error(MODATTN_ERANGE,
                            "the %s extraction process stalled: spinning %.1f s in the kernel without progress "
                            "(%.2f s system, %.2f s user CPU; yielding on a lock that another thread held when it "
                            "was forked)",
                            what, (double)(now_ns() - spin_since) * 1e-9, spun_sys, spun_user);
    } else if (*stalled) {
        st = modattn__error(MODATTN_ERANGE,
                            "the %s extraction process stalled: asleep %.1f s without using the CPU (waiting on "
                            "a lock that another thread held when it was forked)",
                            what, (double)(now_ns() - asleep_since) * 1e-9);
    } else if (timed_out) {
        st = timeout_error(what, lim);
    } else if (r.st) { /* the text over the cap or over this process's budget, or a damaged answer */
        st = modattn__error(r.st, "%s", r.why);
    } else if (r.done && r.h.status == 0 && !r.h.xml_oom && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
        r.text[r.h.len] = '\0';
        out->text = r.text;
        out->len = (size_t)r.h.len;
        out->marks = r.marks;
        out->nmarks = (size_t)r.h.nmarks;
        out->pages = r.h.pages != 0;
        return 0;
    } else if (r.done && (r.h.xml_oom || r.h.status == MODATTN_ENOMEM)) {
        st = oom_error(what, lim);
    } else if (r.done && r.h.status == MODATTN_EBUDGET) {
        /* the text itself did not fit the budget: as for any allocation of this file */
        st = modattn__error(MODATTN_EBUDGET, "%s", r.msg);
    } else if (r.done && r.h.status) {
        st = modattn__error(r.h.status, "%s", r.msg);
    } else {
        st = child_ended(what, ws, killed, tail.b, secs, lim);
    }
    modattn_free(r.text);
    modattn_free(r.marks);
    return st;
}

/* A child forked from a process with other threads (the indexer's embedding thread, an OpenCL
 * runtime's workers) inherits their locks as they were at the fork: one held then is never
 * released in the child, and its first use of it waits forever (glibc makes its own malloc safe;
 * an interposed allocator, such as gcc 12's AddressSanitizer, may not). Such a child sleeps
 * without using the CPU, or spins in sched_yield (system time, no user time), which an extractor
 * never does (it only computes and writes to the pipe that the parent drains): the parent watches
 * for both (extract_once) and forks a new child, at most MODATTN__EXTRACT_TRIES times, rather than
 * waiting for --file-timeout. */
int modattn__extract_isolated(modattn_doc_kind kind, const char *buf, size_t len, const modattn__extract_limits *lim,
                              modattn_doc_text *out, bool *cancelled) {
    char why[400] = "";
    for (int t = 0; t < MODATTN__EXTRACT_TRIES; t++) {
        bool stalled = false;
        int st = extract_once(kind, buf, len, lim, out, cancelled, &stalled);
        if (!stalled) return st;
        snprintf(why, sizeof why, "%s", modattn_last_error());
    }
    return modattn__error(MODATTN_ERANGE, "%s, %d times", why, MODATTN__EXTRACT_TRIES);
}

/* ------------------------------------------------------------------ containers walked in a child
 *
 * An archive's members and an e-mail's attachments are decoded (libarchive, GMime) in a child
 * like the one above, which streams each member back as it meets it: a NAME record before its
 * bytes are decoded (modattn__walk_member), then a MEMBER record with its bytes or the reason it
 * was not read, and an END record with the walker's return. The parent hands each member to fn as
 * the walkers would in-process, while the child waits on the pipe, so that one member at a time is
 * in the parent's memory (counted, MODATTN_MEM_OTHER) and each member's own format is extracted,
 * as any file's, by modattn__extract_isolated. When the child dies (a crash, the memory limit, the
 * time limit) after a NAME without its MEMBER, that member is given to fn as not read, with the
 * reason, and a new child walks on past it; after WALK_MAX_FAULTS such members, or a death between
 * members, the walk ends with the reason. The time limit counts only while the parent waits for
 * the child, not while it handles a member. */

enum { REC_NAME = 1, REC_MEMBER = 2, REC_END = 3 };
typedef struct walk_rec {
    uint32_t type;
    uint32_t namelen; /* REC_NAME, REC_MEMBER */
    uint32_t whylen;  /* REC_MEMBER: why it was not read (then no bytes); REC_END: the walker's message */
    int32_t status;   /* REC_END: the walker's return */
    uint64_t len;     /* REC_MEMBER: its bytes */
} walk_rec;

#define WALK_MAX_NAME 65536
#define WALK_MAX_WHY 1000
#define WALK_MAX_FAULTS 3

static int g_walk_fd = -1;
static size_t g_walk_index, g_walk_skip; /* members met in this child; members a child before gave */

static void walk_send(const walk_rec *h, const char *a, size_t na, const char *b, size_t nb, const char *c, size_t nc) {
    if (!write_all(g_walk_fd, h, sizeof *h) || !write_all(g_walk_fd, a, na) || !write_all(g_walk_fd, b, nb) ||
        !write_all(g_walk_fd, c, nc))
        _exit(120);
}

static bool walk_announce(const char *name) {
    if (++g_walk_index <= g_walk_skip) return true;
    size_t nl = strlen(name);
    if (nl > WALK_MAX_NAME) nl = WALK_MAX_NAME;
    walk_rec h = {REC_NAME, (uint32_t)nl, 0, 0, 0};
    walk_send(&h, name, nl, "", 0, "", 0);
    return false;
}

static int walk_give(void *ud, const char *name, const char *data, size_t n, const char *why) {
    (void)ud;
    size_t nl = strlen(name), wl = why ? strlen(why) : 0;
    if (nl > WALK_MAX_NAME) nl = WALK_MAX_NAME;
    if (wl > WALK_MAX_WHY) wl = WALK_MAX_WHY;
    if (why && !wl) why = "not read", wl = 8;
    walk_rec h = {REC_MEMBER, (uint32_t)nl, (uint32_t)wl, 0, why ? 0 : (uint64_t)n};
    walk_send(&h, name, nl, why ? why : "", wl, why ? "" : data, why ? 0 : n);
    return 0;
}

static _Noreturn void walk_child(modattn__walk_kind kind, const char *buf, size_t len, uint64_t mem, size_t cap,
                                 size_t skip, int out_fd, int err_fd) {
    child_setup(mem, err_fd);
    g_walk_fd = out_fd;
    g_walk_skip = skip;
    modattn__walk_member_hook = walk_announce;
    int st = kind == MODATTN__WALK_ARCHIVE
                 ? modattn__archive_each(buf, len, cap, walk_give, NULL)
                 : modattn__mail_each_attachment(buf, len, cap, kind == MODATTN__WALK_MBOX, walk_give, NULL);
    const char *msg = st ? modattn_last_error() : "";
    size_t ml = strlen(msg);
    if (ml > WALK_MAX_WHY) ml = WALK_MAX_WHY;
    walk_rec h = {REC_END, 0, (uint32_t)ml, st, 0};
    walk_send(&h, msg, ml, "", 0, "", 0);
    _exit(0);
}

/* the parent's side of one walking child */
typedef struct walker {
    pid_t pid;
    int dp, ep;
    errtail tail;
    uint64_t waited_ns, limit_ns, last_ask;
    bool timed_out, killed, cancelled, err_eof;
    const modattn__extract_limits *lim;
} walker;

/* Exactly n bytes from the child, its stderr relayed meanwhile: false at its end, past the time
 * limit or on the caller's cancel (the child then killed). */
static bool walker_read(walker *w, void *p, size_t n) {
    char *c = p;
    while (n) {
        if (w->lim->cancel && now_ns() - w->last_ask >= 50000000ull) { /* every 50 ms at most */
            w->last_ask = now_ns();
            if (w->lim->cancel(w->lim->cancel_ud)) {
                w->cancelled = true;
                return false;
            }
        }
        int wait_ms = 100;
        if (w->limit_ns) {
            if (w->waited_ns >= w->limit_ns) {
                w->timed_out = true;
                return false;
            }
            if ((w->limit_ns - w->waited_ns) / 1000000 < (uint64_t)wait_ms)
                wait_ms = (int)((w->limit_ns - w->waited_ns) / 1000000) + 1;
        }
        struct pollfd pf[2] = {{w->dp, POLLIN, 0}, {w->ep, POLLIN, 0}};
        uint64_t t = now_ns();
        int k = poll(pf, w->err_eof ? 1 : 2, wait_ms);
        w->waited_ns += now_ns() - t;
        if (k < 0 && errno != EINTR) return false;
        if (k <= 0) continue;
        if (!w->err_eof && pf[1].revents) {
            char chunk[4096];
            ssize_t e = read(w->ep, chunk, sizeof chunk);
            if (e > 0) relay_stderr(&w->tail, chunk, (size_t)e);
            else if (e == 0 || (errno != EINTR && errno != EAGAIN)) w->err_eof = true;
        }
        if (pf[0].revents) {
            ssize_t got = read(w->dp, c, n);
            if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (got <= 0) return false;
            c += got;
            n -= (size_t)got;
        }
    }
    return true;
}

/* Ends the child (killed unless it ended by itself) and says why it ended as waitpid does. */
static int walker_end(walker *w, bool kill_it) {
    if (kill_it && !w->killed) {
        kill(w->pid, SIGKILL);
        w->killed = true;
    }
    close(w->dp);
    if (w->ep >= 0) close(w->ep);
    int ws = 0;
    while (waitpid(w->pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return ws;
}

static int walker_start(walker *w, modattn__walk_kind kind, const char *buf, size_t len, size_t cap,
                        const modattn__extract_limits *lim, size_t skip, const char *what) {
    memset(w, 0, sizeof *w);
    w->lim = lim;
    w->limit_ns = lim->timeout_s > 0 ? (uint64_t)(lim->timeout_s * 1e9) : 0;
    int dp[2], ep[2] = {-1, -1};
    if (pipe2(dp, O_CLOEXEC) != 0)
        return modattn__error(MODATTN_EIO, "cannot start the %s extraction process: %s", what, strerror(errno));
    if (pipe2(ep, O_CLOEXEC) != 0) ep[0] = ep[1] = -1;
    fflush(stderr);
    pid_t pid = guarded_fork();
    if (pid < 0) {
        int e = errno;
        close(dp[0]);
        close(dp[1]);
        if (ep[0] >= 0) close(ep[0]), close(ep[1]);
        return modattn__error(MODATTN_EIO, "cannot start the %s extraction process: %s", what, strerror(e));
    }
    if (pid == 0) {
        close(dp[0]);
        if (ep[0] >= 0) close(ep[0]);
        walk_child(kind, buf, len, lim->mem_bytes, cap, skip, dp[1], ep[1]);
    }
    close(dp[1]);
    if (ep[1] >= 0) close(ep[1]);
    w->pid = pid;
    w->dp = dp[0];
    w->ep = ep[0];
    w->err_eof = ep[0] < 0;
    fcntl(w->dp, F_SETFL, fcntl(w->dp, F_GETFL) | O_NONBLOCK);
    if (w->ep >= 0) fcntl(w->ep, F_SETFL, fcntl(w->ep, F_GETFL) | O_NONBLOCK);
    return 0;
}

/* A string of n bytes from the child (modattn__malloc'd, NUL-terminated; NULL with *st set). */
static char *walker_string(walker *w, size_t n, int *st) {
    char *s = modattn__malloc(n + 1, MODATTN_MEM_OTHER);
    if (!s) {
        *st = modattn__mem_last_status();
        return NULL;
    }
    if (!walker_read(w, s, n)) {
        modattn_free(s);
        *st = 0; /* the child's end says why */
        return NULL;
    }
    s[n] = '\0';
    return s;
}

int modattn__walk_isolated(modattn__walk_kind kind, const char *buf, size_t len, size_t cap,
                           const modattn__extract_limits *lim, modattn__archive_member_fn fn, void *ud,
                           bool *cancelled) {
    if (cancelled) *cancelled = false;
    const char *what = kind == MODATTN__WALK_ARCHIVE ? "archive" : kind == MODATTN__WALK_MAIL ? "e-mail" : "mailbox";
    size_t skip = 0;
    for (int faults = 0;; faults++) {
        walker w;
        int st = walker_start(&w, kind, buf, len, cap, lim, skip, what);
        if (st) return st;
        size_t index = skip;
        char *pending = NULL; /* the member announced and not yet given */
        bool ended = false, damaged = false;
        walk_rec h;
        int end_status = 0;
        char end_msg[WALK_MAX_WHY + 1] = "";
        while (!st && !ended && walker_read(&w, &h, sizeof h)) {
            if (h.type == REC_NAME && h.namelen <= WALK_MAX_NAME) {
                modattn_free(pending);
                if (!(pending = walker_string(&w, h.namelen, &st))) break;
                index++;
            } else if (h.type == REC_MEMBER && h.namelen <= WALK_MAX_NAME && h.whylen <= WALK_MAX_WHY &&
                       h.len <= cap && !(h.whylen && h.len)) {
                char *name = walker_string(&w, h.namelen, &st);
                char *why = name && h.whylen ? walker_string(&w, h.whylen, &st) : NULL;
                char *data = name && !h.whylen ? walker_string(&w, (size_t)h.len, &st) : NULL;
                if (name && (why || data)) {
                    modattn_free(pending);
                    pending = NULL;
                    st = fn(ud, name, data, data ? (size_t)h.len : 0, why);
                }
                bool short_read = !st && !(name && (why || data));
                modattn_free(name);
                modattn_free(why);
                modattn_free(data);
                if (short_read) break;
            } else if (h.type == REC_END && h.whylen <= WALK_MAX_WHY) {
                if (walker_read(&w, end_msg, h.whylen)) {
                    end_msg[h.whylen] = '\0';
                    end_status = h.status;
                    ended = true;
                }
            } else {
                damaged = true;
                break;
            }
        }
        int ws = walker_end(&w, st || !ended || damaged);
        const double secs = (double)w.waited_ns * 1e-9;
        if (st || w.cancelled) { /* fn stopped the walk, or the caller did */
            modattn_free(pending);
            if (w.cancelled && cancelled) *cancelled = true;
            return st ? st : 1;
        }
        if (ended && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
            modattn_free(pending);
            return end_status ? modattn__error(end_status, "%s", end_msg) : 0;
        }
        if (damaged) st = modattn__error(MODATTN_EINTERNAL, "the %s extraction process sent a damaged answer", what);
        else if (w.timed_out) st = timeout_error(what, lim);
        else st = child_ended(what, ws, w.killed, w.tail.b, secs, lim);
        if (!pending || damaged) {
            modattn_free(pending);
            return st;
        }
        /* the member it was reading: not read, with the reason; a new child walks on past it */
        char why[600];
        snprintf(why, sizeof why, "%s, reading this member", modattn_last_error());
        st = fn(ud, pending, NULL, 0, why);
        modattn_free(pending);
        if (st) return st;
        if (faults + 1 >= WALK_MAX_FAULTS)
            return modattn__error(MODATTN_ERANGE, "the %s extraction process died reading %d of its members: the "
                                  "rest is not read", what, faults + 1);
        skip = index;
    }
}
