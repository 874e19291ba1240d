/* pipeline/sidecar.c — the sidecar files' shared writer: sealed header pages, crash points, and
 * durable whole-file replacement (pipeline/sidecar.h). */
#include "pipeline/sidecar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

uint64_t modattn__sidecar_header_hash(const unsigned char *page, size_t hash_at) {
    unsigned char tmp[MODATTN__SIDECAR_PAGE];
    memcpy(tmp, page, MODATTN__SIDECAR_PAGE);
    memset(tmp + hash_at, 0, sizeof(uint64_t));
    return XXH3_64bits(tmp, MODATTN__SIDECAR_PAGE);
}

void modattn__sidecar_seal(const void *h, size_t hsize, size_t hash_at, unsigned char *page) {
    const uint64_t zero = 0;
    memset(page, 0, MODATTN__SIDECAR_PAGE);
    memcpy(page, h, hsize);
    memcpy(page + hash_at, &zero, sizeof zero);
    const uint64_t x = modattn__sidecar_header_hash(page, hash_at);
    memcpy(page + hash_at, &x, sizeof x);
}

int modattn__sidecar_write_all(int fd, const void *p, size_t n, uint64_t off) {
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return 0;
}

void modattn__sidecar_crash_point(const char *name) {
    const char *e = getenv("MODATTN_TEST_CRASH_POINT");
    if (e && strcmp(e, name) == 0) raise(SIGKILL);
}

void modattn__sidecar_parent_dir(const char *path, char *dir, size_t len) {
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, len, ".");
}

static void remove_temporaries(const char *path, bool only_dead) {
    char dir[4200];
    modattn__sidecar_parent_dir(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash ? slash + 1 : path);
    const size_t pl = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, pl) != 0) continue;
        if (only_dead) {
            char *end = NULL;
            long pid = strtol(e->d_name + pl, &end, 10);
            if (!end || *end || pid <= 0) continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer lives */
        }
        char f[8400];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        (void)unlink(f);
    }
    closedir(d);
}

int modattn__sidecar_begin(modattn__sidecar_tmp *t, const char *path, bool only_dead) {
    t->path = path;
    t->what = "open";
    t->err = 0;
    remove_temporaries(path, only_dead);
    snprintf(t->tmp, sizeof t->tmp, "%s.tmp.%ld", path, (long)getpid());
    t->fd = open(t->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd < 0) {
        t->err = errno;
        return -1;
    }
    return 0;
}

int modattn__sidecar_commit(modattn__sidecar_tmp *t, const unsigned char *page, const char *crash) {
    bool ok = true;
    t->what = "write";
    ok = modattn__sidecar_write_all(t->fd, page, MODATTN__SIDECAR_PAGE, 0) == 0;
    if (ok) t->what = "fsync", ok = fsync(t->fd) == 0;
    if (!ok) t->err = errno;
    close(t->fd);
    t->fd = -1;
    if (ok) modattn__sidecar_crash_point(crash);
    if (ok) {
        t->what = "rename";
        ok = rename(t->tmp, t->path) == 0;
        if (!ok) t->err = errno;
    }
    if (ok) {
        char dir[4200];
        modattn__sidecar_parent_dir(t->path, dir, sizeof dir);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd) != 0) t->what = "fsync of the folder", ok = false, t->err = errno;
            close(dfd);
        }
    }
    if (!ok) unlink(t->tmp);
    return ok ? 0 : -1;
}

void modattn__sidecar_abandon(modattn__sidecar_tmp *t) {
    if (t->fd >= 0) {
        close(t->fd);
        t->fd = -1;
        unlink(t->tmp);
    }
}
