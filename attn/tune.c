/* attn/tune.c — the `tune` policy: time the capable implementations on the request's shape class,
 * remember the winner per machine in a versioned cache file, and let `auto` and `explain` use it.
 *
 * Shape class: Sq, Sk and B*Hq rounded up to powers of two; D, Dv, causal, dtype, mask, kv_lens
 * and strides exact; the CPU model and thread count are part of the key, so one file can serve
 * several machines sharing a home directory.
 *
 * The cache file ($MODATTN_CACHE_DIR, else $XDG_CACHE_HOME/modattn, else ~/.cache/modattn, file
 * tune-v1.tsv) is only ever replaced whole: read-merge-write under an flock, to a temporary
 * file that is fsynced and renamed over the old one. A missing, corrupt or foreign file is
 * ignored (and rewritten on the next save); a directory that cannot be written keeps tuning in
 * memory. Implementations with priority <= 0 (the reference) are timed only when nothing
 * faster is capable: tuning must not spend minutes proving the oracle is slow. */
#include "attn/internal.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define TUNE_HEADER "# modattn tune cache v1"
#define TUNE_REPS 3

static int64_t pow2_bucket(int64_t x) {
    int64_t b = 1;
    if (x <= 0) return 0;
    while (b < x && b < ((int64_t)1 << 40)) b <<= 1;
    return b;
}

void modattn__tune_key(const modattn_ctx *ctx, int nthreads, const modattn_attn_desc *d, char *key, size_t len) {
    const modattn_cpu_features *f = modattn__cpu_get();
    char cpu[64];
    snprintf(cpu, sizeof cpu, "%s", f->model_name);
    for (char *p = cpu; *p; p++)
        if (*p == '\t' || *p == '|' || *p == '\n') *p = ' ';
    snprintf(key, len, "%s|t%d|%s|%s|Sq%lld|Sk%lld|D%lld|Dv%lld|c%d|bh%lld|m%d|l%d|s%d", cpu, nthreads,
             modattn_device_kind_name(d->device.kind), modattn_dtype_name(d->dtype), (long long)pow2_bucket(d->Sq),
             (long long)pow2_bucket(d->Sk), (long long)d->D, (long long)d->Dv, d->causal ? 1 : 0,
             (long long)pow2_bucket(d->B * d->Hq), d->has_mask ? 1 : 0, d->has_kv_lens ? 1 : 0,
             d->inner_contiguous ? 0 : 1);
    if (d->has_window || d->has_alibi || d->softcap > 0.0f) { /* (absent otherwise: older keys stay valid) */
        size_t k = strlen(key);
        snprintf(key + k, len > k ? len - k : 0, "|w%lld,%lld|a%d|sc%d",
                 d->window_left < 0 ? -1LL : (long long)pow2_bucket(d->window_left + 1),
                 d->window_right < 0 ? -1LL : (long long)pow2_bucket(d->window_right + 1), d->has_alibi ? 1 : 0,
                 d->softcap > 0.0f ? 1 : 0);
    }
    if (ctx->plugin_sig) { /* timings of plugins are theirs as built: a rebuilt one is measured again */
        size_t k = strlen(key);
        snprintf(key + k, len > k ? len - k : 0, "|p%016llx", (unsigned long long)ctx->plugin_sig);
    }
}

static void find_path(modattn_ctx *ctx) {
    const char *dir = getenv("MODATTN_CACHE_DIR");
    char buf[900];
    if (!dir || !*dir) {
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (xdg && *xdg) snprintf(buf, sizeof buf, "%s/modattn", xdg);
        else if (home && *home) snprintf(buf, sizeof buf, "%s/.cache/modattn", home);
        else {
            ctx->tune_path[0] = '\0';
            return;
        }
        dir = buf;
    }
    snprintf(ctx->tune_path, sizeof ctx->tune_path, "%s/tune-v1.tsv", dir);
}

static modattn__tune_entry *find_entry(modattn__tune_entry *v, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].key, key) == 0) return &v[i];
    return NULL;
}

/* Upsert into a growable array; returns 0 or ENOMEM. */
static int put_entry(modattn__tune_entry **v, size_t *n, size_t *cap, const modattn__tune_entry *e) {
    modattn__tune_entry *old = find_entry(*v, *n, e->key);
    if (old) {
        *old = *e;
        return 0;
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        modattn__tune_entry *nv = modattn__realloc(*v, nc * sizeof *nv, MODATTN_MEM_OTHER);
        if (!nv) return modattn__mem_last_status();
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = *e;
    return 0;
}

/* An entry worth believing: every time "name=ms" a finite number in (0, 1e7) ms (under three
 * hours a call), names not empty, and the winner among them. Else why, in why. */
static bool entry_valid(const modattn__tune_entry *e, char *why, size_t len) {
    bool winner_timed = false;
    const char *p = e->times;
    if (!*p) {
        snprintf(why, len, "no times");
        return false;
    }
    while (*p) {
        const char *eq = strchr(p, '=');
        const char *comma = strchr(p, ',');
        if (!eq || (comma && comma < eq) || eq == p) {
            snprintf(why, len, "'%.60s' is not name=milliseconds", p);
            return false;
        }
        char *end = NULL;
        errno = 0;
        double ms = strtod(eq + 1, &end);
        if (end == eq + 1 || (*end && *end != ',') || errno == ERANGE || !(ms > 0 && ms < 1e7)) {
            int tl = comma ? (int)(comma - eq - 1) : (int)strlen(eq + 1);
            snprintf(why, len, "time '%.*s' of %.*s is not a number of milliseconds in (0, 1e7)", tl > 40 ? 40 : tl,
                     eq + 1, (int)(eq - p) > 64 ? 64 : (int)(eq - p), p);
            return false;
        }
        if ((size_t)(eq - p) == strlen(e->winner) && strncmp(p, e->winner, (size_t)(eq - p)) == 0) winner_timed = true;
        p = *end ? end + 1 : end;
    }
    if (!winner_timed) {
        snprintf(why, len, "the winner '%.60s' has no time", e->winner);
        return false;
    }
    return true;
}

/* Parse a cache file into (v, n, cap). Malformed lines are skipped; a wrong header ignores all.
 * Entries with impossible times are skipped too: *ignored counts them, note says the first. */
static int read_file(const char *path, modattn__tune_entry **v, size_t *n, size_t *cap, size_t *ignored,
                     char *note, size_t note_len) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int st = 0;
    if (!fgets(line, sizeof line, f) || strncmp(line, TUNE_HEADER, strlen(TUNE_HEADER)) != 0) {
        fclose(f);
        return 0; /* missing, corrupt or another version: start afresh */
    }
    while (st == 0 && fgets(line, sizeof line, f)) {
        size_t L = strlen(line);
        if (L == 0 || line[L - 1] != '\n') continue; /* truncated line */
        line[L - 1] = '\0';
        char *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2 || strchr(t2 + 1, '\t')) continue;
        *t1 = *t2 = '\0';
        modattn__tune_entry e;
        if (strlen(line) >= sizeof e.key || strlen(t1 + 1) >= sizeof e.winner || strlen(t2 + 1) >= sizeof e.times ||
            !t1[1])
            continue;
        snprintf(e.key, sizeof e.key, "%s", line);
        snprintf(e.winner, sizeof e.winner, "%s", t1 + 1);
        snprintf(e.times, sizeof e.times, "%s", t2 + 1);
        char why[200];
        if (!entry_valid(&e, why, sizeof why)) {
            if (ignored && (*ignored)++ == 0 && note)
                snprintf(note, note_len, "%s: ignored an entry for %.100s: %s", path, e.key, why);
            continue;
        }
        st = put_entry(v, n, cap, &e);
    }
    fclose(f);
    return st;
}

static void load(modattn_ctx *ctx) {
    if (ctx->tune_loaded) return;
    ctx->tune_loaded = true;
    find_path(ctx);
    size_t ignored = 0;
    char note[400] = "";
    if (ctx->tune_path[0]) read_file(ctx->tune_path, &ctx->tune, &ctx->ntune, &ctx->captune, &ignored, note, sizeof note);
    if (ignored > 1)
        snprintf(ctx->tune_note, sizeof ctx->tune_note, "%s (and %zu more); they are timed again when tuned", note, ignored - 1);
    else if (ignored)
        snprintf(ctx->tune_note, sizeof ctx->tune_note, "%s; it is timed again when tuned", note);
}

const char *modattn__tune_note(modattn_ctx *ctx) {
    if (!ctx) return "";
    pthread_mutex_lock(&ctx->mu);
    load(ctx);
    pthread_mutex_unlock(&ctx->mu);
    return ctx->tune_note; /* written once, by the first load */
}

static int mkdirs(const char *dir) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return (mkdir(tmp, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

/* Merge `e` into the file on disk (other processes' entries are kept). Best effort: a failure
 * leaves the old file whole and tuning in memory. */
static void save(modattn_ctx *ctx, const modattn__tune_entry *e) {
    if (!ctx->tune_path[0]) return;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", ctx->tune_path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    if (mkdirs(dir) != 0) return;
    char lock[1100], tmp[1100];
    snprintf(lock, sizeof lock, "%s.lock", ctx->tune_path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", ctx->tune_path, (int)getpid());
    int lfd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lfd < 0) return;
    if (flock(lfd, LOCK_EX) != 0) {
        close(lfd);
        return;
    }
    modattn__tune_entry *v = NULL;
    size_t n = 0, cap = 0;
    if (read_file(ctx->tune_path, &v, &n, &cap, NULL, NULL, 0) == 0 && put_entry(&v, &n, &cap, e) == 0) {
        FILE *f = fopen(tmp, "w");
        if (f) {
            bool ok = fprintf(f, "%s\n", TUNE_HEADER) > 0;
            for (size_t i = 0; i < n && ok; i++) ok = fprintf(f, "%s\t%s\t%s\n", v[i].key, v[i].winner, v[i].times) > 0;
            ok = (fflush(f) == 0) && ok && fsync(fileno(f)) == 0;
            ok = (fclose(f) == 0) && ok;
            if (ok && rename(tmp, ctx->tune_path) == 0) {
                int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0) {
                    fsync(dfd);
                    close(dfd);
                }
            } else {
                unlink(tmp);
            }
        }
    }
    modattn_free(v);
    flock(lfd, LOCK_UN);
    close(lfd);
}

bool modattn__tune_lookup(modattn_ctx *ctx, int nthreads, const modattn_attn_desc *d, modattn__tune_entry *out) {
    char key[192];
    modattn__tune_key(ctx, nthreads, d, key, sizeof key);
    pthread_mutex_lock(&ctx->mu);
    load(ctx);
    const modattn__tune_entry *e = find_entry(ctx->tune, ctx->ntune, key);
    if (e) *out = *e;
    pthread_mutex_unlock(&ctx->mu);
    return e != NULL;
}

double modattn__tune_time(const modattn__tune_entry *e, const char *name) {
    size_t n = strlen(name);
    for (const char *p = e->times; p && *p;) {
        if (strncmp(p, name, n) == 0 && p[n] == '=') return atof(p + n + 1);
        p = strchr(p, ',');
        if (p) p++;
    }
    return -1.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int modattn__tune_measure(modattn_ctx *ctx, const modattn__runner *r, const modattn_attn_desc *d,
                          const modattn_attn_call *c, const long *order, size_t n) {
    pthread_mutex_lock(&ctx->mu);
    load(ctx);
    pthread_mutex_unlock(&ctx->mu);
    bool any_fast = false;
    char reason[256];
    modattn_verdict v;
    for (size_t k = 0; k < n; k++)
        if (ctx->entries[order[k]].impl->priority > 0 && modattn__capable(ctx, (size_t)order[k], d, reason, sizeof reason, &v))
            any_fast = true;
    modattn__tune_entry e;
    memset(&e, 0, sizeof e);
    modattn__tune_key(ctx, r->exec->nthreads, d, e.key, sizeof e.key);
    double best = -1;
    long best_i = -1;
    bool last_ok = false;
    int last_err = MODATTN_EUNSUPPORTED;
    size_t used = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (size_t)order[k];
        if (!modattn__capable(ctx, i, d, reason, sizeof reason, &v)) continue;
        if (any_fast && ctx->entries[i].impl->priority <= 0) continue;
        int st = modattn__run_entry(ctx, r, i, d, c); /* warm-up; also proves it works */
        last_ok = st == 0;
        if (st) {
            last_err = st;
            continue;
        }
        double t[TUNE_REPS];
        int reps = 0;
        for (; reps < TUNE_REPS; reps++) {
            uint64_t t0 = modattn__now_ns();
            st = modattn__run_entry(ctx, r, i, d, c);
            if (st) break;
            t[reps] = (double)(modattn__now_ns() - t0) / 1e6;
        }
        last_ok = st == 0;
        if (st) {
            last_err = st;
            continue;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        double med = t[reps / 2];
        int w = snprintf(e.times + used, sizeof e.times - used, "%s%s=%.4f", used ? "," : "", ctx->entries[i].impl->name, med);
        if (w > 0 && (size_t)w < sizeof e.times - used) used += (size_t)w;
        if (best_i < 0 || med < best) {
            best = med;
            best_i = (long)i;
        }
    }
    if (best_i < 0) return last_err;
    snprintf(e.winner, sizeof e.winner, "%s", ctx->entries[best_i].impl->name);
    pthread_mutex_lock(&ctx->mu);
    int st = put_entry(&ctx->tune, &ctx->ntune, &ctx->captune, &e);
    pthread_mutex_unlock(&ctx->mu);
    if (st) return st;
    save(ctx, &e); /* the file: under its flock (tune_path is fixed by the first load) */
    if (!last_ok) return modattn__run_entry(ctx, r, (size_t)best_i, d, c); /* leave a correct result */
    return 0;
}

void modattn__tune_free(modattn_ctx *ctx) {
    modattn_free(ctx->tune);
    ctx->tune = NULL;
    ctx->ntune = ctx->captune = 0;
}
