/* cli/cmd_watch.c — `modattn index --watch`: after the first pass, the roots' folders are watched
 * with inotify; once events stop for --debounce seconds (or have gone on for 20 debounce periods),
 * the roots are indexed again with --prune. Every pass is a whole `index` run, so nothing depends
 * on which events came or in what order: a flood of events (or the kernel's queue overflowing) is
 * one more pass, a file that changed while it was read gets an event after its write and is read
 * again by the next pass, and each document is written in its own transaction as in any run (a
 * kill loses at most the document being written; the next run redoes it). Unchanged files cost a
 * stat each. A root that disappears has its documents pruned, and is looked for every second
 * until it comes back. SIGINT and SIGTERM stop the watch cleanly: a pass under way stops between
 * documents through the options' cancel hook (what it wrote stays), and the exit status is 0. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/core.h"
#include "modattn/ingest.h"
#include "core/internal_core.h"

static volatile sig_atomic_t g_stop;
static int g_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    (void)sig;
    int e = errno;
    g_stop = 1;
    if (g_pipe[1] >= 0) {
        ssize_t w = write(g_pipe[1], "x", 1);
        (void)w;
    }
    errno = e;
}

static int stop_asked(void *ud) {
    (void)ud;
    return g_stop != 0;
}

#define WATCH_MASK                                                                                       \
    (IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | \
     IN_ATTRIB | IN_MODIFY)

typedef struct watcher {
    int fd;
    bool full_said; /* inotify's watch limit reached: said once, then passes every few seconds */
    bool full;
} watcher;

/* Watches dir and every folder under it (hidden ones and symbolic links not followed, as the
 * walk of `index` does); a folder already watched costs one call. */
static void watch_tree(watcher *w, const char *dir, int depth) {
    if (depth > 64) return;
    if (inotify_add_watch(w->fd, dir, WATCH_MASK | IN_ONLYDIR) < 0) {
        if (errno == ENOSPC) w->full = true;
        return;
    }
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub) continue;
        struct stat sb;
        if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode)))
            watch_tree(w, sub, depth + 1);
    }
    closedir(d);
}

/* Watches the roots (a file root: its folder); true if one of them is missing. */
static bool watch_roots(watcher *w, const cli_index_args *a) {
    bool missing = false;
    for (size_t i = 0; i < a->npaths; i++) {
        struct stat sb;
        if (stat(a->paths[i], &sb) != 0) {
            missing = true;
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            watch_tree(w, a->paths[i], 0);
        } else {
            char parent[PATH_MAX];
            snprintf(parent, sizeof parent, "%s", a->paths[i]);
            char *slash = strrchr(parent, '/');
            if (slash == parent) slash[1] = '\0';
            else if (slash) *slash = '\0';
            else snprintf(parent, sizeof parent, ".");
            if (inotify_add_watch(w->fd, parent, WATCH_MASK | IN_ONLYDIR) < 0 && errno == ENOSPC) w->full = true;
        }
    }
    if (w->full && !w->full_said) {
        w->full_said = true;
        fprintf(stderr, "modattn: index --watch: note: inotify's watch limit is reached "
                        "(/proc/sys/fs/inotify/max_user_watches): the folders are also indexed every 5 s\n");
    }
    return missing;
}

/* One pass: the roots indexed again with --prune; said when it changed something. The library
 * status that stops the watch (0: go on). */
static int pass(const cli_index_args *a, cli_index_job *j) {
    json_array_clear(j->ui.errors);
    json_array_clear(j->ui.skipped);
    j->ui.not_said = 0;
    memset(&j->s, 0, sizeof j->s);
    uint64_t t0 = modattn__now_ns();
    j->st = modattn_index_paths(j->store, j->model, a->paths, a->npaths, &j->o, &j->s);
    j->secs = (double)(modattn__now_ns() - t0) * 1e-9;
    cli_index_clear_line(&j->ui);
    if (j->st) {
        int st = j->st;
        cli_fail("index --watch", st);
        j->st = 0;
        /* a store that cannot be written stops the watch; anything else waits for the next event */
        return st == MODATTN_ENOMEM || st == MODATTN_EVERSION ? st : 0;
    }
    const modattn_index_stats *s = &j->s;
    if (s->files_indexed || s->files_pruned || s->errors) {
        cli_index_args shown = *a;
        shown.prune = true;
        j->rc = 0;
        (void)cli_index_print(&shown, j, 0);
        fflush(stdout);
    }
    return 0;
}

int cli_index_watch(const cli_index_args *a, cli_index_job *j) {
    watcher w = {inotify_init1(IN_NONBLOCK | IN_CLOEXEC), false, false};
    if (w.fd < 0) {
        fprintf(stderr, "modattn: index --watch: inotify: %s\n", strerror(errno));
        return 1;
    }
    if (pipe2(g_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        fprintf(stderr, "modattn: index --watch: %s\n", strerror(errno));
        close(w.fd);
        return 1;
    }
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    j->o.cancel = stop_asked;
    j->o.prune = true;
    bool missing = watch_roots(&w, a);
    /* (said once the watches are in place: a change from now on is seen) */
    if (!a->quiet && !a->json)
        fprintf(stderr, "modattn: index --watch: watching %zu path%s for changes (SIGINT or SIGTERM stops)\n",
                a->npaths, a->npaths == 1 ? "" : "s");
    bool dirty = false;
    uint64_t first_ns = 0, last_ns = 0;
    const uint64_t debounce_ns = (uint64_t)(a->debounce_s * 1e9);
    int st = 0;
    char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (!g_stop && !st) {
        int timeout = -1;
        if (dirty) {
            uint64_t now = modattn__now_ns(), due = last_ns + debounce_ns;
            if (due > first_ns + 20 * debounce_ns) due = first_ns + 20 * debounce_ns; /* events that never stop */
            timeout = now >= due ? 0 : (int)((due - now) / 1000000 + 1);
        } else if (missing) {
            timeout = 1000;
        } else if (w.full) {
            timeout = 5000;
        }
        struct pollfd p[2] = {{w.fd, POLLIN, 0}, {g_pipe[0], POLLIN, 0}};
        int k = poll(p, 2, timeout);
        if (k < 0 && errno != EINTR) {
            fprintf(stderr, "modattn: index --watch: poll: %s\n", strerror(errno));
            st = 1;
            break;
        }
        if (g_stop) break;
        if (k > 0 && (p[0].revents & POLLIN)) {
            ssize_t n;
            while ((n = read(w.fd, buf, sizeof buf)) > 0) { /* any event (IN_Q_OVERFLOW too): a pass */
                uint64_t now = modattn__now_ns();
                if (!dirty) first_ns = now;
                dirty = true;
                last_ns = now;
            }
        }
        uint64_t now = modattn__now_ns();
        if (!dirty && (missing || w.full) && k == 0) { /* a root may be back; over the limit: every 5 s */
            bool was = missing;
            missing = watch_roots(&w, a);
            if (w.full || (was && !missing)) {
                dirty = true;
                first_ns = last_ns = 0;
            }
        }
        if (dirty && (now >= last_ns + debounce_ns || now >= first_ns + 20 * debounce_ns)) {
            dirty = false;
            missing = watch_roots(&w, a); /* folders made meanwhile, before the pass reads them */
            st = pass(a, j);
            missing = watch_roots(&w, a);
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(w.fd);
    close(g_pipe[0]);
    close(g_pipe[1]);
    g_pipe[0] = g_pipe[1] = -1;
    if (st > 1) return cli_fail("index --watch", st);
    if (st == 1) return 1;
    if (!a->quiet && !a->json) fprintf(stderr, "modattn: index --watch: stopped\n");
    return 0;
}
