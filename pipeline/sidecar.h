/* pipeline/sidecar.h — what the store's sidecar files (the vector file PATH.vec, the ANN index
 * PATH.ann) share in how they are written: a 4096-byte header page sealed by an XXH3 of itself,
 * the test's crash points, and the durable replacement of a whole file (a temporary PATH.tmp.PID,
 * fsynced, renamed over PATH, the folder fsynced). Each file's layout stays its own (vecfile.c,
 * ann_internal.h); not a public header. */
#ifndef MODATTN_PIPELINE_SIDECAR_H
#define MODATTN_PIPELINE_SIDECAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODATTN__SIDECAR_PAGE 4096u

/* XXH3 of the header page with the 8 bytes at hash_at (its own checksum field) taken as zero. */
uint64_t modattn__sidecar_header_hash(const unsigned char *page, size_t hash_at);
/* The header h (hsize <= 4096 bytes, its checksum field at hash_at) into a zeroed page, sealed. */
void modattn__sidecar_seal(const void *h, size_t hsize, size_t hash_at, unsigned char *page);
/* pwrite of all n bytes at off (EINTR retried): 0, or -1 with errno. */
int modattn__sidecar_write_all(int fd, const void *p, size_t n, uint64_t off);
/* MODATTN_TEST_CRASH_POINT=NAME: the process kills itself (SIGKILL, as kill -9 would) when it
 * reaches the point NAME, so that the kill tests hit each stage of an update for certain
 * (tests/pipeline/kill_index.sh, test_ann.c): vecfile.segment, vecfile.mask, vecfile.header,
 * vecfile.rewrite, ann.rewrite. A test knob; unset, nothing. */
void modattn__sidecar_crash_point(const char *name);
/* The folder of path ("." when it names none). */
void modattn__sidecar_parent_dir(const char *path, char *dir, size_t len);

/* A whole file written anew: begin opens PATH.tmp.PID; the caller writes its body past the
 * header page through fd; commit puts the sealed header page at offset 0, fsyncs, closes, and
 * renames the temporary over PATH (then fsyncs the folder: the rename itself must survive a
 * crash); abandon closes and removes the temporary. On failure what names the step ("open",
 * "write", "fsync", "rename", "fsync of the folder") and err its errno, for the caller's message;
 * the temporary is removed. */
typedef struct modattn__sidecar_tmp {
    const char *path;
    char tmp[4300];
    int fd;
    const char *what;
    int err;
} modattn__sidecar_tmp;
/* Before opening, removes PATH.tmp.* left by writers killed before their rename: every one when
 * the caller holds the store's write lock (no live writer owns one), else (only_dead) those whose
 * process is gone. 0, or -1 (what "open"). */
int modattn__sidecar_begin(modattn__sidecar_tmp *t, const char *path, bool only_dead);
/* crash: the crash point reached after the temporary is complete, before the rename. 0 or -1. */
int modattn__sidecar_commit(modattn__sidecar_tmp *t, const unsigned char *page, const char *crash);
void modattn__sidecar_abandon(modattn__sidecar_tmp *t);

#endif
