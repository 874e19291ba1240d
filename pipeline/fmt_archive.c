/* pipeline/fmt_archive.c — ZIP and TAR archives read as folders, in memory through libarchive:
 * list the members, read one member (bounded), and the path rule "archive.zip!/inner/file.txt".
 * Nothing is extracted to disk; a member name that would escape the archive ("../", absolute) or
 * an encrypted member refuses the whole archive, before any member is handed out, and archives
 * nest at most MODATTN_ARCHIVE_MAX_DEPTH deep. The indexer's walk calls these (see the report of
 * issue 40's formats: modattn_archive_sniff on a file, modattn_archive_list for its members,
 * modattn_archive_read for each, each member then sniffed and extracted as a file would be). */
#include <archive.h>
#include <archive_entry.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"


bool (*modattn__walk_member_hook)(const char *name);

bool modattn__walk_member(const char *name) {
    if (modattn__walk_member_hook && modattn__walk_member_hook(name ? name : "")) return true;
    const char *e = getenv("MODATTN_TEST_WALK_FAULT");
    if (e && strcmp(e, "1") == 0 && name) {
        if (strstr(name, "modattn-test-crash")) raise(SIGSEGV);
        if (strstr(name, "modattn-test-hang"))
            for (;;) sleep(1);
    }
    return false;
}

static bool tar_magic(const unsigned char *h, size_t n) { return n >= 262 && memcmp(h + 257, "ustar", 5) == 0; }

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

static bool archive_name(const char *name) {
    static const char *const ext[] = {".zip", ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz",
                                      ".tar.zst", ".tzst", NULL};
    for (int i = 0; ext[i]; i++)
        if (ends_with(name, ext[i])) return true;
    return false;
}

bool modattn_archive_sniff(const char *name, const unsigned char *head, size_t len) {
    if (!head) return false;
    if (len >= 4 && (memcmp(head, "PK\3\4", 4) == 0 || memcmp(head, "PK\5\6", 4) == 0)) return true;
    if (tar_magic(head, len)) return true;
    /* a compressed TAR: known by its name (the head is compressed) */
    bool compressed = (len >= 2 && head[0] == 0x1f && head[1] == 0x8b) || (len >= 3 && memcmp(head, "BZh", 3) == 0) ||
                      (len >= 6 && memcmp(head, "\xfd" "7zXZ\0", 6) == 0) ||
                      (len >= 4 && memcmp(head, "\x28\xb5\x2f\xfd", 4) == 0);
    return compressed && name && archive_name(name) && !ends_with(name, ".zip");
}

static struct archive *open_archive(const char *buf, size_t len, int *st) {
    struct archive *a = archive_read_new();
    if (!a) {
        *st = modattn__error(MODATTN_ENOMEM, "libarchive: out of memory");
        return NULL;
    }
    archive_read_support_format_zip(a);
    archive_read_support_format_tar(a);
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_zstd(a);
    if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK) {
        *st = modattn__error(MODATTN_EFORMAT, "not a readable ZIP or TAR archive: %s",
                            archive_error_string(a) ? archive_error_string(a) : "unknown format");
        archive_read_free(a);
        return NULL;
    }
    *st = 0;
    return a;
}

/* One pass over the headers; fn NULL: only the checks. */
static int pass(const char *buf, size_t len, int (*fn)(void *, const modattn_archive_member *), void *ud) {
    int st;
    struct archive *a = open_archive(buf, len, &st);
    if (!a) return st;
    struct archive_entry *e;
    for (;;) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
            st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated archive: %s",
                               archive_error_string(a) ? archive_error_string(a) : "unreadable entry");
            break;
        }
        const char *name = archive_entry_pathname(e);
        if (modattn__name_escapes(name)) {
            st = modattn__error(MODATTN_EFORMAT, "an archive whose member name \"%.200s\" escapes it (zip slip): not read",
                               name ? name : "");
            break;
        }
        if (archive_entry_is_encrypted(e)) {
            st = modattn__error(MODATTN_EFORMAT, "an archive with an encrypted member (%.200s): not read", name);
            break;
        }
        if (fn) {
            modattn_archive_member m = {name, archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : 0,
                                        archive_entry_filetype(e) == AE_IFDIR, archive_name(name)};
            if (archive_entry_filetype(e) == AE_IFREG || m.is_dir) {
                if ((st = fn(ud, &m))) break;
            }
        }
        /* reading the headers of a streamed archive reads through the data: a truncated member
         * shows here */
        if (archive_read_data_skip(a) < ARCHIVE_WARN) {
            st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated archive (member %.200s): %s", name,
                               archive_error_string(a) ? archive_error_string(a) : "unreadable data");
            break;
        }
    }
    archive_read_free(a);
    return st;
}

int modattn_archive_list(const char *buf, size_t len, int (*fn)(void *ud, const modattn_archive_member *m),
                         void *ud) {
    int st = pass(buf, len, NULL, NULL); /* the whole archive is checked before anything is handed out */
    if (st) return st;
    return pass(buf, len, fn, ud);
}

int modattn_archive_read(const char *buf, size_t len, const char *member, size_t cap, char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    int st = pass(buf, len, NULL, NULL);
    if (st) return st;
    struct archive *a = open_archive(buf, len, &st);
    if (!a) return st;
    struct archive_entry *e;
    st = modattn__error(MODATTN_EINVAL, "the archive has no file \"%.200s\"", member);
    while (archive_read_next_header(a, &e) >= ARCHIVE_WARN) {
        if (archive_entry_filetype(e) != AE_IFREG || strcmp(archive_entry_pathname(e), member) != 0) continue;
        size_t n = 0, dcap = 0;
        char *d = NULL;
        st = 0;
        for (;;) {
            if (n + 65536 + 1 > dcap) {
                size_t nc = dcap ? dcap * 2 : 65536 * 2;
                char *nd = modattn__realloc(d, nc, MODATTN_MEM_OTHER);
                if (!nd) {
                    st = modattn__mem_last_status();
                    break;
                }
                d = nd;
                dcap = nc;
            }
            la_ssize_t k = archive_read_data(a, d + n, 65536);
            if (k == 0) break;
            if (k < 0) {
                st = modattn__error(MODATTN_EFORMAT, "a damaged archive member %.200s: %s", member,
                                   archive_error_string(a) ? archive_error_string(a) : "unreadable");
                break;
            }
            n += (size_t)k;
            if (n > cap) {
                st = modattn__error(MODATTN_ERANGE,
                                   "archive member %.200s expands past %zu bytes (--max-file-size): not read (a "
                                   "decompression bomb?)",
                                   member, cap);
                break;
            }
        }
        if (st) {
            modattn_free(d);
        } else {
            d[n] = '\0';
            *out = d;
            *out_len = n;
        }
        break;
    }
    archive_read_free(a);
    return st;
}

/* Reads the current entry's data into *d (grown as needed), at most cap bytes: 0, MODATTN_ERANGE
 * past cap, MODATTN_EFORMAT damaged, or the allocator's status. */
static int read_entry(struct archive *a, const char *name, size_t cap, char **d, size_t *dcap, size_t *n) {
    *n = 0;
    for (;;) {
        if (*n + 65536 + 1 > *dcap) {
            size_t nc = *dcap ? *dcap * 2 : 65536 * 2;
            char *nd = modattn__realloc(*d, nc, MODATTN_MEM_OTHER);
            if (!nd) return modattn__mem_last_status();
            *d = nd;
            *dcap = nc;
        }
        la_ssize_t k = archive_read_data(a, *d + *n, 65536);
        if (k == 0) break;
        if (k < 0)
            return modattn__error(MODATTN_EFORMAT, "a damaged archive member %.200s: %s", name,
                                 archive_error_string(a) ? archive_error_string(a) : "unreadable");
        *n += (size_t)k;
        if (*n > cap)
            return modattn__error(MODATTN_ERANGE,
                                 "expands past %zu bytes (--max-file-size): not read (a decompression bomb?)", cap);
    }
    (*d)[*n] = '\0';
    return 0;
}

int modattn__archive_each(const char *buf, size_t len, size_t cap, modattn__archive_member_fn fn, void *ud) {
    int st;
    struct archive *a = open_archive(buf, len, &st);
    if (!a) return st;
    struct archive_entry *e;
    char *d = NULL;
    size_t dcap = 0;
    for (;;) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
            st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated archive: %s",
                               archive_error_string(a) ? archive_error_string(a) : "unreadable entry");
            break;
        }
        if (archive_entry_filetype(e) != AE_IFREG) continue;
        const char *name = archive_entry_pathname(e);
        if (modattn__walk_member(name)) { /* given before (extract.c): not decoded again */
            if (archive_read_data_skip(a) < ARCHIVE_WARN) {
                st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated archive (member %.200s): %s", name,
                                   archive_error_string(a) ? archive_error_string(a) : "unreadable data");
                break;
            }
            continue;
        }
        char why[512] = "";
        if (!name || !*name) {
            snprintf(why, sizeof why, "a member without a name: not read");
            name = "";
        } else if (modattn__name_escapes(name)) {
            snprintf(why, sizeof why, "its name escapes the archive (zip slip): not read");
        } else if (archive_entry_is_encrypted(e)) {
            snprintf(why, sizeof why, "an encrypted member: not read");
        } else if (archive_entry_size_is_set(e) && archive_entry_size(e) > (la_int64_t)cap) {
            snprintf(why, sizeof why, "%lld bytes, over the size cap of %zu bytes (--max-file-size): not read",
                     (long long)archive_entry_size(e), cap);
        } else {
            size_t n = 0;
            int rs = read_entry(a, name, cap, &d, &dcap, &n);
            if (rs == MODATTN_ERANGE) {
                snprintf(why, sizeof why, "%s", modattn_last_error());
            } else if (rs == MODATTN_EFORMAT) {
                st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated archive (member %.200s): %s", name,
                                   archive_error_string(a) ? archive_error_string(a) : "unreadable data");
                break;
            } else if (rs) {
                st = rs;
                break;
            } else {
                if ((st = fn(ud, name, d, n, NULL))) break;
                continue;
            }
        }
        if ((st = fn(ud, name, NULL, 0, why))) break;
        /* a member not read is skipped over; a truncated one shows here */
        if (archive_read_data_skip(a) < ARCHIVE_WARN) {
            st = modattn__error(MODATTN_EFORMAT, "a damaged or truncated archive (member %.200s): %s", name,
                               archive_error_string(a) ? archive_error_string(a) : "unreadable data");
            break;
        }
    }
    modattn_free(d);
    archive_read_free(a);
    return st;
}

char *modattn_archive_join(const char *archive_path, const char *member) {
    size_t a = strlen(archive_path), m = strlen(member);
    char *s = modattn__malloc(a + m + 3, MODATTN_MEM_OTHER);
    if (!s) return NULL;
    memcpy(s, archive_path, a);
    memcpy(s + a, "!/", 2);
    memcpy(s + a + 2, member, m + 1);
    return s;
}

int modattn_archive_split(const char *path, char **archive, char **member) {
    *archive = *member = NULL;
    const char *bang = strstr(path, "!/");
    if (!bang) return 0;
    int depth = 0;
    for (const char *p = path; (p = strstr(p, "!/")) != NULL; p += 2) depth++;
    if (depth > MODATTN_ARCHIVE_MAX_DEPTH)
        return modattn__error(MODATTN_EFORMAT, "archives nested %d deep (at most %d are read): not read", depth,
                             MODATTN_ARCHIVE_MAX_DEPTH);
    /* every member part must stay inside its archive */
    for (const char *p = bang; p; p = strstr(p + 2, "!/")) {
        const char *s = p + 2, *e = strstr(s, "!/");
        size_t l = e ? (size_t)(e - s) : strlen(s);
        char part[4096];
        if (l == 0 || l >= sizeof part) return modattn__error(MODATTN_EFORMAT, "an empty or overlong archive member path");
        memcpy(part, s, l);
        part[l] = '\0';
        if (modattn__name_escapes(part))
            return modattn__error(MODATTN_EFORMAT, "archive member \"%.200s\" escapes its archive", part);
    }
    size_t al = (size_t)(bang - path);
    *archive = modattn__malloc(al + 1, MODATTN_MEM_OTHER);
    *member = modattn__strdup(bang + 2, MODATTN_MEM_OTHER);
    if (!*archive || !*member) {
        modattn_free(*archive);
        modattn_free(*member);
        *archive = *member = NULL;
        return modattn__mem_last_status();
    }
    memcpy(*archive, path, al);
    (*archive)[al] = '\0';
    return 1;
}
